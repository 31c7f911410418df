//! Exemptions: registered routines (the reflex engine) that let a tier-2 call run without a prompt.
//!
//! Invariants: an exemption is asked only for tier-2 calls to known tools; it sees a copy of the
//! arguments; only `Ok(true)` exempts, and one that errors or panics does not exempt (the failure is
//! reported so the gate can log it). The list lock is never held while an exemption runs.

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde_json::Value;

type ExemptionFn = dyn Fn(&str, &Value) -> Result<bool, String> + Send + Sync;

/// The exemptions of one gate.
#[derive(Default)]
pub(crate) struct Exemptions {
    next_id: AtomicU64,
    list: Mutex<Vec<(u64, Arc<ExemptionFn>)>>,
}

/// What the exemptions said about one call.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ExemptionOutcome {
    pub exempt: bool,
    /// Messages of exemptions that failed (they did not exempt).
    pub failures: Vec<String>,
}

impl Exemptions {
    pub(crate) fn add<F, E>(self: &Arc<Self>, exemption: F) -> ExemptionHandle
    where
        F: Fn(&str, &Value) -> Result<bool, E> + Send + Sync + 'static,
        E: Display,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let boxed: Arc<ExemptionFn> = Arc::new(move |tool: &str, args: &Value| {
            exemption(tool, args).map_err(|e| e.to_string())
        });
        self.lock().push((id, boxed));
        ExemptionHandle {
            id,
            exemptions: Arc::downgrade(self),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Asks the exemptions in registration order until one exempts.
    pub(crate) fn check(&self, tool: &str, arguments: &Value) -> ExemptionOutcome {
        let snapshot: Vec<Arc<ExemptionFn>> =
            self.lock().iter().map(|(_, f)| Arc::clone(f)).collect();
        let mut outcome = ExemptionOutcome::default();
        for exemption in snapshot {
            let copy = arguments.clone();
            match catch_unwind(AssertUnwindSafe(|| exemption(tool, &copy))) {
                Ok(Ok(true)) => {
                    outcome.exempt = true;
                    return outcome;
                }
                Ok(Ok(false)) => {}
                Ok(Err(message)) => outcome.failures.push(message),
                Err(_) => outcome.failures.push("the exemption panicked".to_owned()),
            }
        }
        outcome
    }

    fn remove(&self, id: u64) -> bool {
        let mut list = self.lock();
        let before = list.len();
        list.retain(|(entry, _)| *entry != id);
        list.len() != before
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Arc<ExemptionFn>)>> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Undoes one `add_exemption`. Dropping the handle keeps the exemption.
#[derive(Debug)]
pub struct ExemptionHandle {
    id: u64,
    exemptions: Weak<Exemptions>,
}

impl ExemptionHandle {
    /// Removes the exemption; returns whether it was still registered.
    pub fn undo(self) -> bool {
        self.exemptions
            .upgrade()
            .is_some_and(|exemptions| exemptions.remove(self.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_true_exempts_and_errors_are_reported() {
        let exemptions = Arc::new(Exemptions::default());
        let _a = exemptions.add(|_: &str, _: &Value| Err::<bool, _>("boom"));
        let _b = exemptions.add(|tool: &str, _: &Value| Ok::<_, String>(tool == "lamp"));
        let outcome = exemptions.check("lamp", &json!({}));
        assert_eq!(
            outcome,
            ExemptionOutcome {
                exempt: true,
                failures: vec!["boom".into()]
            }
        );
        let outcome = exemptions.check("door", &json!({}));
        assert!(!outcome.exempt);
    }

    #[test]
    fn a_panicking_exemption_does_not_exempt() {
        let exemptions = Arc::new(Exemptions::default());
        let _h = exemptions.add(|_: &str, _: &Value| -> Result<bool, String> { panic!("bad") });
        let outcome = exemptions.check("lamp", &json!({}));
        assert!(!outcome.exempt);
        assert_eq!(outcome.failures.len(), 1);
    }

    #[test]
    fn undo_removes_once() {
        let exemptions = Arc::new(Exemptions::default());
        let handle = exemptions.add(|_: &str, _: &Value| Ok::<_, String>(true));
        let keep = exemptions.add(|_: &str, args: &Value| Ok::<_, String>(args["x"] == 1));
        assert_eq!(exemptions.len(), 2);
        assert!(handle.undo());
        assert_eq!(exemptions.len(), 1);
        assert!(!exemptions.check("t", &json!({"x": 2})).exempt);
        assert!(exemptions.check("t", &json!({"x": 1})).exempt);
        drop(keep);
        assert_eq!(exemptions.len(), 1);
    }
}
