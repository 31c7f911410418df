//! `current_time` (tier 0): the current date and time in Europe/Istanbul, read from a [`Clock`].
//!
//! Invariants: time is always Europe/Istanbul, from jiff's bundled time-zone database, so no system
//! tzdata is needed; the clock is injected so tests fix it.

use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::clock::{Clock, TIME_ZONE};
use crate::tool::{Tier, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// The `current_time` tool.
pub struct CurrentTime {
    spec: ToolSpec,
    clock: Arc<dyn Clock>,
}

impl CurrentTime {
    pub const NAME: &'static str = "current_time";

    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let spec = ToolSpec::builder(
            Self::NAME,
            "Returns the current date, time and weekday in Europe/Istanbul.",
        )
        .input_schema(json!({"type": "object", "properties": {}, "required": []}))
        .tier(Tier::Read)
        .build();
        Self { spec, clock }
    }

    /// The text the tool returns for `now`, e.g.
    /// `29.09.2026 15:30:00, Tuesday (Europe/Istanbul, UTC+03:00); ISO 8601: 2026-09-29T15:30:00+03:00`.
    pub fn describe(now: Timestamp) -> Result<String, ToolError> {
        let zoned = now
            .in_tz(TIME_ZONE)
            .map_err(|e| ToolError::Failed(format!("time zone {TIME_ZONE} unavailable: {e}")))?;
        Ok(format!(
            "{} ({TIME_ZONE}, UTC{}); ISO 8601: {}",
            zoned.strftime("%d.%m.%Y %H:%M:%S, %A"),
            zoned.strftime("%:z"),
            zoned.strftime("%Y-%m-%dT%H:%M:%S%:z"),
        ))
    }
}

#[async_trait]
impl Tool for CurrentTime {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let now = Timestamp::try_from(self.clock.now())
            .map_err(|e| ToolError::Failed(format!("the clock is out of range: {e}")))?;
        Ok(ToolOutput::text(Self::describe(now)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FixedClock;
    use tokio_util::sync::CancellationToken;

    fn ctx() -> ToolContext {
        ToolContext {
            tool_use_id: "t".into(),
            session_id: "s".into(),
            channel: "test".into(),
            cancel: CancellationToken::new(),
            progress: Default::default(),
        }
    }

    #[tokio::test]
    async fn reports_istanbul_time_from_the_clock() {
        let instant: Timestamp = "2026-09-29T12:30:00Z".parse().unwrap();
        let tool = CurrentTime::new(Arc::new(FixedClock::from(instant)));
        assert_eq!(tool.spec().tier(), Some(Tier::Read));
        let out = tool.call(json!({}), ctx()).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(
                "29.09.2026 15:30:00, Tuesday (Europe/Istanbul, UTC+03:00); \
                 ISO 8601: 2026-09-29T15:30:00+03:00"
            )
        );
    }

    #[tokio::test]
    async fn ignores_input_it_does_not_need() {
        let instant: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        let tool = CurrentTime::new(Arc::new(FixedClock::from(instant)));
        let out = tool.call(json!({"x": 1}), ctx()).await.unwrap();
        assert_eq!(
            out,
            ToolOutput::text(
                "01.01.2020 03:00:00, Wednesday (Europe/Istanbul, UTC+03:00); \
                 ISO 8601: 2020-01-01T03:00:00+03:00"
            )
        );
    }
}
