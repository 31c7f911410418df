//! A newline-delimited JSON splitter: bytes in any split → one string per non-empty line.
//!
//! Invariants: a line ends at `\n` (a `\r` before it is dropped); a line is decoded as UTF-8 only
//! once complete, so a multi-byte character split between chunks is intact; blank lines are
//! skipped; a line longer than [`MAX_LINE`] is an error, so a broken server cannot grow the buffer
//! without bound; at the end of the body an unterminated last line is still delivered.

/// The longest line accepted.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// What is wrong with a byte stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NdjsonError {
    #[error("a JSON line is not UTF-8")]
    NotUtf8,
    #[error("a JSON line is longer than {MAX_LINE} bytes")]
    LineTooLong,
}

/// The incremental splitter.
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    line: Vec<u8>,
}

impl NdjsonDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; complete lines are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), NdjsonError> {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            self.extend(&rest[..end])?;
            rest = &rest[end + 1..];
            self.line_done(out)?;
        }
        self.extend(rest)
    }

    /// The body ended: a last line without its newline is still delivered.
    pub fn finish(&mut self, out: &mut Vec<String>) -> Result<(), NdjsonError> {
        self.line_done(out)
    }

    fn extend(&mut self, bytes: &[u8]) -> Result<(), NdjsonError> {
        if self.line.len() + bytes.len() > MAX_LINE {
            return Err(NdjsonError::LineTooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, out: &mut Vec<String>) -> Result<(), NdjsonError> {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        out.push(String::from_utf8(line).map_err(|_| NdjsonError::NotUtf8)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_in(bytes: &[u8], piece: usize) -> Vec<String> {
        let mut decoder = NdjsonDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk, &mut out).unwrap();
        }
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn lines_survive_any_split_even_inside_characters() {
        let body = "{\"a\":\"çay 🍵\"}\r\n\n{\"b\":1}\n{\"c\":2}".as_bytes();
        let whole = lines_in(body, body.len());
        assert_eq!(whole, ["{\"a\":\"çay 🍵\"}", "{\"b\":1}", "{\"c\":2}"]);
        for piece in 1..body.len() {
            assert_eq!(lines_in(body, piece), whole, "piece {piece}");
        }
    }

    #[test]
    fn a_broken_line_is_an_error_not_a_panic() {
        let mut decoder = NdjsonDecoder::new();
        let mut out = Vec::new();
        assert_eq!(
            decoder.push(b"{\"a\":\"\xff\"}\n", &mut out),
            Err(NdjsonError::NotUtf8)
        );
        let mut decoder = NdjsonDecoder::new();
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(decoder.push(&long, &mut out), Err(NdjsonError::LineTooLong));
    }
}
