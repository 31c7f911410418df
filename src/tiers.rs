//! A tier as people read it (0, 1, 2: `tau.toml`'s `tier = N`, "tier 2" on a card) and as the wire
//! carries it ([`Tier`], whose numbers are one higher because proto3 keeps 0 for "not set"). Every
//! client translates through here, so a tier-2 call reads "tier 2" live, replayed and in JSON.

use crate::proto::v1::Tier;

impl Tier {
    /// The tier number people read (0-2); `None` when not set.
    pub fn number(self) -> Option<u8> {
        match self {
            Tier::Unspecified => None,
            Tier::Read => Some(0),
            Tier::DigitalWrite => Some(1),
            Tier::Physical => Some(2),
        }
    }

    /// The wire value of tier `number` (0-2); `Unspecified` for any other number.
    pub fn from_number(number: u8) -> Self {
        match number {
            0 => Tier::Read,
            1 => Tier::DigitalWrite,
            2 => Tier::Physical,
            _ => Tier::Unspecified,
        }
    }

    /// Its name in JSON output: `read`, `digital_write`, `physical`, or `unspecified`.
    pub fn json_name(self) -> &'static str {
        match self {
            Tier::Unspecified => "unspecified",
            Tier::Read => "read",
            Tier::DigitalWrite => "digital_write",
            Tier::Physical => "physical",
        }
    }
}

/// The tier number (0-2) of a message's raw `tier` field; `None` when not set or unknown.
pub fn tier_number(raw: i32) -> Option<u8> {
    Tier::try_from(raw).ok().and_then(Tier::number)
}

/// The tier a question is shown with: an unknown tier counts as the most careful one, 2.
pub fn asked_tier(raw: i32) -> u8 {
    tier_number(raw).unwrap_or(2)
}

/// The tier as a line shows it: `0`, `1`, `2`, or `?` when not set.
pub fn tier_text(raw: i32) -> String {
    tier_number(raw).map_or_else(|| "?".to_owned(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_wire_values_map_one_to_one() {
        for number in 0..=2u8 {
            let tier = Tier::from_number(number);
            assert_eq!(tier.number(), Some(number));
            assert_eq!(tier_number(tier as i32), Some(number));
            assert_eq!(tier_text(tier as i32), number.to_string());
        }
        assert_eq!(Tier::Physical as i32, 3, "the wire value is one higher");
        assert_eq!(tier_text(Tier::Physical as i32), "2");
        assert_eq!(Tier::from_number(3), Tier::Unspecified);
        assert_eq!(tier_number(0), None);
        assert_eq!(tier_number(42), None);
        assert_eq!(tier_text(42), "?");
        assert_eq!(asked_tier(0), 2);
        assert_eq!(asked_tier(Tier::Read as i32), 0);
        assert_eq!(Tier::DigitalWrite.json_name(), "digital_write");
    }
}
