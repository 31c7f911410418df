//! The open-files limit (`RLIMIT_NOFILE`): raised from the soft limit to the hard one when taud
//! starts, so connections, session files and logs do not compete for the usual 1,024.
//!
//! Invariant: the limit is only ever raised, never lowered; a platform that refuses the hard limit
//! (macOS caps it at `OPEN_MAX` when the hard limit is unlimited) gets the largest of a few
//! smaller values it accepts.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Soft limits tried, in order, when the hard limit itself is refused.
const FALLBACKS: [u64; 2] = [65_536, 10_240];

/// The limit before and after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileLimits {
    /// The soft limit found at start.
    pub before: u64,
    /// The soft limit now.
    pub after: u64,
    /// The hard limit.
    pub hard: u64,
}

/// The limit could not be read or raised.
#[derive(Debug, thiserror::Error)]
#[error("cannot raise the open-files limit: {0}")]
pub struct NofileError(#[from] nix::Error);

/// Raises the soft open-files limit as far as the hard limit allows.
pub fn raise() -> Result<NofileLimits, NofileError> {
    // `rlim_t` is a u64 on Linux and macOS.
    let (before, hard_u64): (u64, u64) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if before >= hard_u64 {
        return Ok(NofileLimits {
            before,
            after: before,
            hard: hard_u64,
        });
    }
    let mut last = None;
    let candidates =
        std::iter::once(hard_u64).chain(FALLBACKS.into_iter().filter(|f| *f < hard_u64));
    for target in candidates.filter(|t| *t > before) {
        match setrlimit(Resource::RLIMIT_NOFILE, target, hard_u64) {
            Ok(()) => {
                return Ok(NofileLimits {
                    before,
                    after: target,
                    hard: hard_u64,
                });
            }
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(NofileError(e)),
        None => Ok(NofileLimits {
            before,
            after: before,
            hard: hard_u64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_limit_and_never_lower() {
        let limits = raise().unwrap();
        assert!(limits.after >= limits.before);
        assert!(limits.after <= limits.hard);
        let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(soft, limits.after);
        // Raising again changes nothing.
        assert_eq!(raise().unwrap().before, limits.after);
    }
}
