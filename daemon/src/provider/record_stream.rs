//! The feed/end loop every streaming decoder shares: a [`RecordSplitter`] cuts the body's bytes
//! into records (SSE events, NDJSON lines, event-stream frames) and a [`RecordDecoder`] turns each
//! record into [`ModelEvent`]s; every `RecordDecoder` is a [`FrameDecoder`] through this loop.
//! Also the stream failures the decoders share, and the splitters of the shared framings (SSE,
//! NDJSON); the AWS event stream's is in `bedrock::converse_decoder`. See ARCHITECTURE.md,
//! `provider/`.
//!
//! Invariants: records are handled in order and none after the protocol's last event; the records
//! a splitter delivered before it failed are handled before its failure is returned; when the
//! body ends, the decoder is told (so a record cut off by the end is read as cut off, not as
//! malformed), the splitter's last records are handled, and a protocol that has not finished
//! decides whether that is a failure ([`RecordDecoder::unfinished`]).

use crate::model::{ModelError, ModelEvent};
use crate::provider::http::FrameDecoder;
use crate::provider::ndjson::NdjsonDecoder;
use crate::provider::retry::Failure;
use crate::provider::sse::{SseDecoder, SseEvent};

/// A failure of the stream's framing or content: fatal, retrying would read the same.
pub fn protocol(message: impl Into<String>) -> Failure {
    Failure::fatal(ModelError::Stream(message.into()))
}

/// The body ended inside a record: the connection was lost mid-reply.
pub fn cut_off() -> Failure {
    Failure::retryable(
        ModelError::Unavailable("the stream was cut off inside a record".into()),
        None,
    )
}

/// The body ended before the protocol's last event (`message` says which): retryable.
pub fn ended_early(message: &str) -> Failure {
    Failure::retryable(ModelError::Unavailable(message.to_owned()), None)
}

/// Bytes in any split → the records of one framing.
pub trait RecordSplitter: Send + 'static {
    type Record;

    /// Feeds `chunk`; complete records are appended to `out`.
    fn split(&mut self, chunk: &[u8], out: &mut Vec<Self::Record>) -> Result<(), Failure>;

    /// The body ended: its last records, or the failure of a body cut inside a record.
    fn finish(&mut self, out: &mut Vec<Self::Record>) -> Result<(), Failure>;
}

/// One protocol's records → model events.
pub trait RecordDecoder: Send + 'static {
    type Splitter: RecordSplitter;

    /// The splitter of this body.
    fn splitter(&mut self) -> &mut Self::Splitter;

    /// Handles one record.
    fn record(
        &mut self,
        record: &<Self::Splitter as RecordSplitter>::Record,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), Failure>;

    /// Whether the protocol's last event was seen.
    fn finished(&self) -> bool;

    /// The body ended; called before the splitter's last records are handled.
    fn body_ended(&mut self) {}

    /// The body ended before [`RecordDecoder::finished`]: a failure, or (for a protocol whose
    /// end is optional) the last events.
    fn unfinished(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure>;
}

/// Handles `records` until the protocol finishes.
fn handle<D: RecordDecoder>(
    decoder: &mut D,
    records: &[<D::Splitter as RecordSplitter>::Record],
    out: &mut Vec<ModelEvent>,
) -> Result<(), Failure> {
    for record in records {
        if decoder.finished() {
            break;
        }
        decoder.record(record, out)?;
    }
    Ok(())
}

impl<D: RecordDecoder> FrameDecoder for D {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, Failure> {
        let mut records = Vec::new();
        let split = self.splitter().split(chunk, &mut records);
        handle(self, &records, out)?;
        split?;
        Ok(self.finished())
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        self.body_ended();
        let mut records = Vec::new();
        let split = self.splitter().finish(&mut records);
        handle(self, &records, out)?;
        split?;
        if self.finished() {
            return Ok(());
        }
        self.unfinished(out)
    }
}

/// Server-sent events. A chunk with a broken line is refused whole: the events before the broken
/// line in that chunk are not delivered (the failure is fatal either way).
impl RecordSplitter for SseDecoder {
    type Record = SseEvent;

    fn split(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), Failure> {
        let before = out.len();
        self.push(chunk, out).map_err(|e| {
            out.truncate(before);
            protocol(e.to_string())
        })
    }

    fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), Failure> {
        SseDecoder::finish(self, out).map_err(|e| protocol(e.to_string()))
    }
}

/// Newline-delimited JSON. A chunk with a broken line is refused whole, as with SSE.
impl RecordSplitter for NdjsonDecoder {
    type Record = String;

    fn split(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), Failure> {
        let before = out.len();
        self.push(chunk, out).map_err(|e| {
            out.truncate(before);
            protocol(e.to_string())
        })
    }

    fn finish(&mut self, out: &mut Vec<String>) -> Result<(), Failure> {
        NdjsonDecoder::finish(self, out).map_err(|e| protocol(e.to_string()))
    }
}
