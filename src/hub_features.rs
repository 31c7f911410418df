//! What a hub says it accepts beyond what every hub of `tau.v1` serves: the names it lists in
//! `GetStatusResponse.features`, shared by the hub (which lists [`SERVED`]) and its clients (which
//! read a list with [`support`]).
//!
//! A client tries a newer request first and asks GetStatus only when the request is refused, so
//! the common path costs no extra call: the list then says whether the refusal is the hub's word
//! on this request or a hub that does not know the field.
//!
//! Invariants: a name is never reused for something else and never leaves [`SERVED`] while the hub
//! still accepts what it names; an empty list means a hub too old to say, never "nothing".

/// StartTurn's `new_session`: the turn starts in a session the call creates.
pub const START_TURN_NEW_SESSION: &str = "start_turn.new_session";

/// Every feature this build of the hub lists, in the order it lists them.
pub const SERVED: &[&str] = &[START_TURN_NEW_SESSION];

/// What a hub's list says of one feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Listed: the hub accepts it.
    Listed,
    /// Not listed by a hub that lists features: it does not accept it.
    Absent,
    /// The hub lists no features: it predates the list, and says nothing either way.
    Unsaid,
}

/// What `listed` (a hub's `GetStatusResponse.features`) says of `feature`.
pub fn support(listed: &[String], feature: &str) -> Support {
    if listed.is_empty() {
        Support::Unsaid
    } else if listed.iter().any(|name| name == feature) {
        Support::Listed
    } else {
        Support::Absent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_says_yes_no_or_nothing() {
        let listed = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let served = listed(SERVED);
        assert_eq!(support(&served, START_TURN_NEW_SESSION), Support::Listed);
        assert_eq!(
            support(
                &listed(&["start_turn.something_else"]),
                START_TURN_NEW_SESSION
            ),
            Support::Absent
        );
        assert_eq!(support(&[], START_TURN_NEW_SESSION), Support::Unsaid);
    }

    #[test]
    fn names_are_plain_and_listed_once() {
        for (i, name) in SERVED.iter().enumerate() {
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.'),
                "{name}"
            );
            assert!(!SERVED[..i].contains(name), "{name} twice");
        }
    }
}
