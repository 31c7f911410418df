//! Tool declarations: the permission [`Tier`] and the [`ToolSpec`] a model reads.
//!
//! Invariants: a spec built in Rust always carries a tier, because [`ToolSpecBuilder::build`] only
//! exists once [`ToolSpecBuilder::tier`] was called (type state). The tier and the effect sentence are
//! recorded inside the spec itself as `annotations.tau = {tier, effect}`, so a spec that travels as
//! JSON (a plugin, a stored catalog) keeps them; a spec from such a source whose annotations lack a
//! tier is refused by the catalog with `UntieredToolError`. The effect defaults to the description.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// How much a tool can change the world. Serialized as its number (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// Reads, no side effects: runs freely, logged at DEBUG.
    Read = 0,
    /// Changes digital state (files, notes, messages): runs, logged at INFO with arguments and result.
    DigitalWrite = 1,
    /// Acts on the physical world, or activates code tau wrote itself: asks, every time.
    Physical = 2,
}

impl Tier {
    /// The tier's number: 0, 1 or 2.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The tier for a number, if it is 0, 1 or 2.
    pub fn from_number(number: u64) -> Option<Self> {
        match number {
            0 => Some(Self::Read),
            1 => Some(Self::DigitalWrite),
            2 => Some(Self::Physical),
            _ => None,
        }
    }

    /// The stable name: `READ`, `DIGITAL_WRITE` or `PHYSICAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "READ",
            Self::DigitalWrite => "DIGITAL_WRITE",
            Self::Physical => "PHYSICAL",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.number(), self.as_str())
    }
}

impl Serialize for Tier {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.number())
    }
}

impl<'de> Deserialize<'de> for Tier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = u64::deserialize(deserializer)?;
        Tier::from_number(number)
            .ok_or_else(|| D::Error::custom(format!("tier must be 0, 1 or 2, not {number}")))
    }
}

/// tau's own annotation on a tool spec: `annotations.tau`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TauAnnotation {
    pub tier: Tier,
    /// The one English sentence an approval prompt shows.
    pub effect: String,
}

/// The `annotations` object of a spec. Other keys are kept as they came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau: Option<TauAnnotation>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A tool as declared to the model: `{name, description, inputSchema: {json}, annotations}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    /// English: the model reads it.
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: InputSchema,
    #[serde(default)]
    pub annotations: ToolAnnotations,
}

/// The JSON Schema of a tool's input, wrapped as Converse does (`{"json": {...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSchema {
    pub json: Value,
}

impl ToolSpec {
    /// Starts a spec. `build` becomes available only after `tier(...)`.
    pub fn builder(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> ToolSpecBuilder<NoTier> {
        ToolSpecBuilder {
            name: name.into(),
            description: description.into(),
            schema: json!({"type": "object", "properties": {}, "required": []}),
            effect: None,
            tier: NoTier,
        }
    }

    /// Reads a spec from JSON (a dynamic source). It may lack a tier; the catalog refuses it then.
    pub fn from_json(value: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// The declared tier, if the annotations carry one.
    pub fn tier(&self) -> Option<Tier> {
        self.annotations.tau.as_ref().map(|tau| tau.tier)
    }

    /// The effect sentence, falling back to the description.
    pub fn effect(&self) -> &str {
        match &self.annotations.tau {
            Some(tau) if !tau.effect.trim().is_empty() => &tau.effect,
            _ => &self.description,
        }
    }
}

/// Type state of a builder that has no tier yet; `build` needs a [`Tier`] in its place.
#[derive(Debug, Clone, Copy)]
pub struct NoTier;

/// Builds a [`ToolSpec`]. `State` is [`NoTier`] until `tier(...)` turns it into [`Tier`]; `build`
/// exists only on `ToolSpecBuilder<Tier>`, so a spec built in code cannot lack a tier.
#[derive(Debug)]
pub struct ToolSpecBuilder<State> {
    name: String,
    description: String,
    schema: Value,
    effect: Option<String>,
    tier: State,
}

impl<State> ToolSpecBuilder<State> {
    /// The JSON Schema of the input (an object schema).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.schema = schema;
        self
    }

    /// The sentence approval prompts show; defaults to the description.
    pub fn effect(mut self, effect: impl Into<String>) -> Self {
        self.effect = Some(effect.into());
        self
    }

    /// Sets the tier; required before `build`.
    pub fn tier(self, tier: Tier) -> ToolSpecBuilder<Tier> {
        ToolSpecBuilder {
            name: self.name,
            description: self.description,
            schema: self.schema,
            effect: self.effect,
            tier,
        }
    }
}

impl ToolSpecBuilder<Tier> {
    /// The finished spec, with `annotations.tau = {tier, effect}`.
    pub fn build(self) -> ToolSpec {
        let effect = self.effect.unwrap_or_else(|| self.description.clone());
        ToolSpec {
            name: self.name,
            description: self.description,
            input_schema: InputSchema { json: self.schema },
            annotations: ToolAnnotations {
                tau: Some(TauAnnotation {
                    tier: self.tier,
                    effect,
                }),
                other: Map::new(),
            },
        }
    }
}

/// Whether `name` is a valid tool name for the providers: `[A-Za-z0-9_-]{1,64}`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_records_tier_and_effect_in_annotations() {
        let spec = ToolSpec::builder("desk_lamp", "Switches the desk lamp on or off.")
            .tier(Tier::Physical)
            .build();
        assert_eq!(spec.tier(), Some(Tier::Physical));
        assert_eq!(spec.effect(), "Switches the desk lamp on or off.");
        let value = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            value["annotations"]["tau"],
            json!({"tier": 2, "effect": "Switches the desk lamp on or off."})
        );
        assert_eq!(value["inputSchema"]["json"]["type"], "object");
    }

    #[test]
    fn explicit_effect_wins_and_round_trips() {
        let spec = ToolSpec::builder("x", "Does x.")
            .effect("Moves x.")
            .tier(Tier::DigitalWrite)
            .build();
        assert_eq!(spec.effect(), "Moves x.");
        let back = ToolSpec::from_json(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn json_spec_without_tier_has_none() {
        let spec = ToolSpec::from_json(json!({
            "name": "plain", "description": "d", "inputSchema": {"json": {"type": "object"}},
            "annotations": {"other": 1}
        }))
        .unwrap();
        assert_eq!(spec.tier(), None);
        assert_eq!(spec.effect(), "d");
        assert_eq!(spec.annotations.other["other"], 1);
    }

    #[test]
    fn bad_tier_number_is_an_error() {
        let result = ToolSpec::from_json(json!({
            "name": "p", "description": "d", "inputSchema": {"json": {}},
            "annotations": {"tau": {"tier": 3, "effect": "e"}}
        }));
        assert!(result.is_err());
    }

    #[test]
    fn tool_names_are_checked() {
        assert!(is_valid_tool_name("current_time"));
        assert!(is_valid_tool_name("a-b_9"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }
}
