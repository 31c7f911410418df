//! A server-sent events splitter (the framing of the Anthropic Messages and OpenAI-compatible
//! streams): bytes in any split → `(event, data)` records.
//!
//! Invariants: lines end at `\n`, `\r\n` or `\r` (also when a `\r\n` pair is split between two
//! chunks); a record ends at a blank line; several `data:` lines join with `\n`; comment lines
//! (`:`) and the `id` / `retry` fields are ignored; a line is decoded as UTF-8 only once complete,
//! so a multi-byte character split between chunks is intact; a line longer than
//! [`MAX_LINE`] or a record whose joined `data` is longer than [`MAX_RECORD`] is an error, so a
//! broken server cannot grow the buffers without bound.

/// The longest line accepted.
pub const MAX_LINE: usize = 8 * 1024 * 1024;
/// The most bytes of joined `data` one record may carry (one line of [`MAX_LINE`] fits).
pub const MAX_RECORD: usize = MAX_LINE;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    /// The joined `data:` lines.
    pub data: String,
}

/// What is wrong with a byte stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("a server-sent event line is not UTF-8")]
    NotUtf8,
    #[error("a server-sent event line is longer than {MAX_LINE} bytes")]
    LineTooLong,
    #[error("a server-sent event carries more than {MAX_RECORD} bytes of data")]
    RecordTooLarge,
}

/// The incremental splitter.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    skip_lf: bool,
    event: String,
    data: Vec<String>,
    /// The length of `data` once joined.
    data_len: usize,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; complete events are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(end) => {
                    self.extend_line(&rest[..end])?;
                    self.skip_lf = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out)?;
                }
                None => {
                    self.extend_line(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// The body ended: a record not closed by a blank line is still delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > MAX_LINE {
            return Err(SseError::LineTooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                let joined = self.data_len + usize::from(!self.data.is_empty()) + value.len();
                if joined > MAX_RECORD {
                    return Err(SseError::RecordTooLarge);
                }
                self.data_len = joined;
                self.data.push(value.to_owned());
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.data_len = 0;
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        out.push(SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data).join("\n"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in(bytes: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk, &mut out).unwrap();
        }
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn line_endings_comments_and_multi_line_data() {
        let raw =
            b": hello\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\nevent: b\rdata: x\r\rdata: tail";
        for piece in 1..=raw.len() {
            let events = decode_in(raw, piece);
            assert_eq!(
                events,
                vec![
                    SseEvent {
                        event: "a".into(),
                        data: "1\n2".into()
                    },
                    SseEvent {
                        event: "b".into(),
                        data: "x".into()
                    },
                    SseEvent {
                        event: String::new(),
                        data: "tail".into()
                    },
                ],
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn a_record_is_capped_across_its_data_lines() {
        const MIB: usize = 1024 * 1024;
        let line = format!("data: {}\n", "x".repeat(MIB - 1));
        // Seven lines of 1 MiB - 1 joined by six newlines, a newline and a last line of 1 MiB:
        // exactly MAX_RECORD bytes.
        let record = |last: usize| format!("{}data: {}\n\n", line.repeat(7), "y".repeat(last));
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.push(record(MIB).as_bytes(), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), MAX_RECORD);
        // The count starts afresh with the next record; one byte more is refused.
        let mut out = Vec::new();
        decoder.push(record(MIB).as_bytes(), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(record(MIB + 1).as_bytes(), &mut out),
            Err(SseError::RecordTooLarge)
        );
        assert!(out.is_empty());
        // Many small lines are refused the same way, in any split.
        let mut decoder = SseDecoder::new();
        let small = "data: abc\n".repeat(MAX_RECORD / 4 + 1);
        let result = small
            .as_bytes()
            .chunks(64 * 1024)
            .try_for_each(|chunk| decoder.push(chunk, &mut out));
        assert_eq!(result, Err(SseError::RecordTooLarge));
    }

    #[test]
    fn multi_byte_characters_split_anywhere() {
        let raw = "event: t\ndata: Çay 🍵\n\n".as_bytes();
        for piece in 1..raw.len() {
            assert_eq!(decode_in(raw, piece)[0].data, "Çay 🍵");
        }
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(b"data: \xff\n", &mut out),
            Err(SseError::NotUtf8)
        );
    }
}
