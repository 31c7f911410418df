//! The `application/vnd.amazon.eventstream` framing: an incremental decoder that checks both CRCs,
//! and an encoder (used by tests and mock servers to build bodies).
//!
//! Frame layout (big-endian): total length u32, headers length u32, prelude CRC32 of the first 8
//! bytes, headers, payload, message CRC32 of everything before it.
//!
//! Invariants: the prelude CRC is checked before waiting for the rest of a frame, so a corrupted
//! length never makes the decoder buffer more; a frame is at most [`MAX_FRAME`] bytes; every header
//! type is decoded (or rejected) by its declared size; a body that ends inside a frame is an error.

use std::fmt;

/// The largest frame accepted.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
const PRELUDE: usize = 12;
const OVERHEAD: usize = 16;

/// A header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(Vec<u8>),
    String(String),
    /// Milliseconds since the epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The value of a string header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, v)| match v {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// What is wrong with an event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventStreamError {
    #[error("event-stream prelude CRC mismatch (expected {expected:08x}, computed {computed:08x})")]
    PreludeCrc { expected: u32, computed: u32 },
    #[error("event-stream message CRC mismatch (expected {expected:08x}, computed {computed:08x})")]
    MessageCrc { expected: u32, computed: u32 },
    #[error("event-stream frame has a bad length: {0}")]
    Length(String),
    #[error("event-stream header is malformed: {0}")]
    Header(String),
    #[error("the event stream ended inside a frame ({0} bytes left)")]
    Truncated(usize),
}

/// The incremental decoder.
#[derive(Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("buffered", &self.buf.len())
            .finish()
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_be_bytes(word)
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; complete frames are appended to `out`. After an error the decoder is spent.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Frame>) -> Result<(), EventStreamError> {
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        let result = loop {
            let rest = &self.buf[start..];
            if rest.len() < PRELUDE {
                break Ok(());
            }
            let total = be_u32(rest) as usize;
            let headers_len = be_u32(&rest[4..]) as usize;
            let expected = be_u32(&rest[8..]);
            let computed = crc32fast::hash(&rest[..8]);
            if expected != computed {
                break Err(EventStreamError::PreludeCrc { expected, computed });
            }
            if !(OVERHEAD..=MAX_FRAME).contains(&total) {
                break Err(EventStreamError::Length(format!(
                    "total length {total} is outside {OVERHEAD}..={MAX_FRAME}"
                )));
            }
            if headers_len > total - OVERHEAD {
                break Err(EventStreamError::Length(format!(
                    "headers length {headers_len} does not fit a {total}-byte frame"
                )));
            }
            if rest.len() < total {
                break Ok(());
            }
            let frame = &rest[..total];
            let expected = be_u32(&frame[total - 4..]);
            let computed = crc32fast::hash(&frame[..total - 4]);
            if expected != computed {
                break Err(EventStreamError::MessageCrc { expected, computed });
            }
            let headers = match parse_headers(&frame[PRELUDE..PRELUDE + headers_len]) {
                Ok(headers) => headers,
                Err(error) => break Err(error),
            };
            out.push(Frame {
                headers,
                payload: frame[PRELUDE + headers_len..total - 4].to_vec(),
            });
            start += total;
        };
        self.buf.drain(..start);
        result
    }

    /// The body ended: an error if a partial frame is left.
    pub fn finish(&self) -> Result<(), EventStreamError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(EventStreamError::Truncated(self.buf.len()))
        }
    }
}

fn take<'a>(bytes: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], EventStreamError> {
    if bytes.len() < n {
        return Err(EventStreamError::Header(format!(
            "{what} runs past the headers"
        )));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn parse_headers(mut bytes: &[u8]) -> Result<Vec<(String, HeaderValue)>, EventStreamError> {
    let mut headers = Vec::new();
    while !bytes.is_empty() {
        let name_len = take(&mut bytes, 1, "a header name length")?[0] as usize;
        if name_len == 0 {
            return Err(EventStreamError::Header("an empty header name".into()));
        }
        let name = std::str::from_utf8(take(&mut bytes, name_len, "a header name")?)
            .map_err(|_| EventStreamError::Header("a header name is not UTF-8".into()))?
            .to_owned();
        let kind = take(&mut bytes, 1, "a header type")?[0];
        let mut fixed = |n: usize| -> Result<[u8; 8], EventStreamError> {
            let raw = take(&mut bytes, n, "a header value")?;
            let mut word = [0u8; 8];
            word[8 - n..].copy_from_slice(raw);
            Ok(word)
        };
        let value = match kind {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(i8::from_be_bytes([fixed(1)?[7]])),
            3 => {
                let w = fixed(2)?;
                HeaderValue::Short(i16::from_be_bytes([w[6], w[7]]))
            }
            4 => {
                let w = fixed(4)?;
                HeaderValue::Int(i32::from_be_bytes([w[4], w[5], w[6], w[7]]))
            }
            5 => HeaderValue::Long(i64::from_be_bytes(fixed(8)?)),
            8 => HeaderValue::Timestamp(i64::from_be_bytes(fixed(8)?)),
            6 | 7 => {
                let len = take(&mut bytes, 2, "a header value length")?;
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                let raw = take(&mut bytes, len, "a header value")?.to_vec();
                if kind == 6 {
                    HeaderValue::Bytes(raw)
                } else {
                    HeaderValue::String(String::from_utf8(raw).map_err(|_| {
                        EventStreamError::Header(format!("header {name} is not UTF-8"))
                    })?)
                }
            }
            9 => {
                let mut uuid = [0u8; 16];
                uuid.copy_from_slice(take(&mut bytes, 16, "a uuid header")?);
                HeaderValue::Uuid(uuid)
            }
            other => {
                return Err(EventStreamError::Header(format!(
                    "header {name} has unknown type {other}"
                )));
            }
        };
        headers.push((name, value));
    }
    Ok(headers)
}

/// Encodes one message with string headers (tests, mock servers). Names longer than 255 bytes and
/// values longer than 65535 bytes are cut.
pub fn encode_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut hdr = Vec::new();
    for (name, value) in headers {
        let name = &name.as_bytes()[..name.len().min(255)];
        let value = &value.as_bytes()[..value.len().min(65535)];
        hdr.push(name.len() as u8);
        hdr.extend_from_slice(name);
        hdr.push(7);
        hdr.extend_from_slice(&(value.len() as u16).to_be_bytes());
        hdr.extend_from_slice(value);
    }
    let total = PRELUDE + hdr.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(hdr.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out[..8]);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&hdr);
    out.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&out);
    out.extend_from_slice(&message_crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const FIXTURES: [(&[u8], &str); 3] = [
        (
            include_bytes!("../../../tests/fixtures/providers/bedrock/text_turn.bin"),
            include_str!("../../../tests/fixtures/providers/bedrock/text_turn.expected.json"),
        ),
        (
            include_bytes!("../../../tests/fixtures/providers/bedrock/tool_turn.bin"),
            include_str!("../../../tests/fixtures/providers/bedrock/tool_turn.expected.json"),
        ),
        (
            include_bytes!("../../../tests/fixtures/providers/bedrock/throttled_mid_stream.bin"),
            include_str!(
                "../../../tests/fixtures/providers/bedrock/throttled_mid_stream.expected.json"
            ),
        ),
    ];

    fn decode_in(bytes: &[u8], piece: usize) -> Result<Vec<Frame>, EventStreamError> {
        let mut decoder = Decoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk, &mut out)?;
        }
        decoder.finish()?;
        Ok(out)
    }

    fn as_json(frames: &[Frame]) -> Value {
        Value::Array(
            frames
                .iter()
                .map(|f| {
                    let headers: serde_json::Map<String, Value> = f
                        .headers
                        .iter()
                        .map(|(n, v)| match v {
                            HeaderValue::String(s) => (n.clone(), Value::String(s.clone())),
                            other => (n.clone(), Value::String(format!("{other:?}"))),
                        })
                        .collect();
                    serde_json::json!({
                        "headers": headers,
                        "payload": serde_json::from_slice::<Value>(&f.payload).unwrap(),
                    })
                })
                .collect(),
        )
    }

    #[test]
    fn fixtures_match_the_independent_decoding_whole_and_in_pieces() {
        for (bin, expected) in FIXTURES {
            let expected: Value = serde_json::from_str(expected).unwrap();
            let whole = decode_in(bin, bin.len()).unwrap();
            assert_eq!(as_json(&whole), expected);
            for piece in [1, 2, 3, 5, 7, 11, 12, 13, 16, 100, 333] {
                assert_eq!(decode_in(bin, piece).unwrap(), whole, "piece {piece}");
            }
        }
    }

    #[test]
    fn encoder_matches_the_published_vectors() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            hex::encode(encode_frame(&[], b"{'foo':'bar'}")),
            "0000001d00000000fd528c5a7b27666f6f273a27626172277dc3653936"
        );
        assert_eq!(
            hex::encode(encode_frame(
                &[("content-type", "application/json")],
                b"{'foo':'bar'}"
            )),
            "0000003d0000002007fd83960c636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e7b27666f6f273a27626172277d8d9c08b1"
        );
        let frame = encode_frame(
            &[
                (":message-type", "event"),
                (":event-type", "contentBlockDelta"),
                (":content-type", "application/json"),
            ],
            br#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcd"}"#,
        );
        assert_eq!(frame.len(), 162);
        assert_eq!(&frame[8..12], &0x9ACA_D7C8u32.to_be_bytes());
        assert_eq!(&frame[158..], &0x9B1C_FB23u32.to_be_bytes());
        let decoded = decode_in(&frame, 5).unwrap();
        assert_eq!(decoded[0].header(":event-type"), Some("contentBlockDelta"));
    }

    #[test]
    fn corruption_is_caught_by_the_right_check() {
        let (bin, _) = FIXTURES[0];
        let mut prelude = bin.to_vec();
        prelude[2] ^= 0x01;
        assert!(matches!(
            decode_in(&prelude, 7),
            Err(EventStreamError::PreludeCrc { .. })
        ));
        let mut payload = bin.to_vec();
        let headers_len = be_u32(&bin[4..]) as usize;
        payload[PRELUDE + headers_len + 2] ^= 0x20;
        assert!(matches!(
            decode_in(&payload, 7),
            Err(EventStreamError::MessageCrc { .. })
        ));
        let mut bad_len = encode_frame(&[], b"x");
        bad_len[4..8].copy_from_slice(&100u32.to_be_bytes());
        let crc = crc32fast::hash(&bad_len[..8]);
        bad_len[8..12].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            decode_in(&bad_len, 64),
            Err(EventStreamError::Length(_))
        ));
        assert_eq!(
            decode_in(&bin[..bin.len() - 3], 50),
            Err(EventStreamError::Truncated(
                bin.len() - 3 - frames_before_last(bin)
            ))
        );
    }

    fn frames_before_last(bin: &[u8]) -> usize {
        let mut at = 0;
        let mut last = 0;
        while at < bin.len() {
            last = at;
            at += be_u32(&bin[at..]) as usize;
        }
        last
    }

    #[test]
    fn every_header_type_decodes() {
        let mut hdr = Vec::new();
        let mut add = |name: &str, kind: u8, value: &[u8]| {
            hdr.push(name.len() as u8);
            hdr.extend_from_slice(name.as_bytes());
            hdr.push(kind);
            hdr.extend_from_slice(value);
        };
        add("t", 0, &[]);
        add("f", 1, &[]);
        add("b", 2, &[0xFF]);
        add("s", 3, &[0x01, 0x02]);
        add("i", 4, &[0, 0, 1, 0]);
        add("l", 5, &[0, 0, 0, 0, 0, 0, 0, 9]);
        add("y", 6, &[0, 2, 0xAB, 0xCD]);
        add("ts", 8, &[0, 0, 0, 0, 0, 0, 0x03, 0xE8]);
        add("u", 9, &[7; 16]);
        let parsed = parse_headers(&hdr).unwrap();
        let values: Vec<HeaderValue> = parsed.into_iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            vec![
                HeaderValue::Bool(true),
                HeaderValue::Bool(false),
                HeaderValue::Byte(-1),
                HeaderValue::Short(0x0102),
                HeaderValue::Int(256),
                HeaderValue::Long(9),
                HeaderValue::Bytes(vec![0xAB, 0xCD]),
                HeaderValue::Timestamp(1000),
                HeaderValue::Uuid([7; 16]),
            ]
        );
        assert!(parse_headers(&[1, b'x', 42]).is_err());
        assert!(parse_headers(&[1, b'x', 7, 0, 9, b'a']).is_err());
    }
}
