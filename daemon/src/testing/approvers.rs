//! Test approvers: [`ScriptedApprover`] replays decisions a test wrote down, [`UnansweredApprover`]
//! never answers (for timeouts and cancels).
//!
//! Invariants: neither approves on its own: the scripted one approves only where the script says
//! `Approved`, and an exhausted script answers with an error (which refuses).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::gate::{ApprovalOutcome, ApprovalRequest, Approver, ApproverError};

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedAnswer {
    /// Answer with this decision.
    Decide(ApprovalOutcome),
    /// A raw answer as a channel would send it, read with `ApprovalOutcome::from_answer`
    /// (e.g. `"maybe"` is an invalid answer).
    Raw(String),
    /// Fail as an approver that errors.
    Fail(String),
    /// Panic inside `decide` (the gate must contain it).
    Panic,
    /// Never answer.
    Hang,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers from a script, in order. For tests only.
#[derive(Debug, Default)]
pub struct ScriptedApprover {
    answers: Mutex<VecDeque<ScriptedAnswer>>,
    requests: Mutex<Vec<ApprovalRequest>>,
    timeout: Option<Duration>,
}

impl ScriptedApprover {
    pub fn new(answers: impl IntoIterator<Item = ScriptedAnswer>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            timeout: None,
        }
    }

    /// A script of plain decisions.
    pub fn decisions(decisions: impl IntoIterator<Item = ApprovalOutcome>) -> Self {
        Self::new(decisions.into_iter().map(ScriptedAnswer::Decide))
    }

    /// Gives the approver its own timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Every request this approver was asked, in order.
    pub fn requests(&self) -> Vec<ApprovalRequest> {
        lock(&self.requests).clone()
    }

    /// How many scripted answers are left.
    pub fn remaining(&self) -> usize {
        lock(&self.answers).len()
    }
}

#[async_trait]
impl Approver for ScriptedApprover {
    fn name(&self) -> &str {
        "scripted"
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        lock(&self.requests).push(request.clone());
        let answer = lock(&self.answers).pop_front();
        match answer {
            Some(ScriptedAnswer::Decide(decision)) => Ok(decision),
            Some(ScriptedAnswer::Raw(raw)) => Ok(ApprovalOutcome::from_answer(&raw)),
            Some(ScriptedAnswer::Fail(message)) => Err(ApproverError(message)),
            Some(ScriptedAnswer::Panic) => panic!("scripted approver panic"),
            Some(ScriptedAnswer::Hang) => futures::future::pending().await,
            None => Err(ApproverError("no scripted decision left".to_owned())),
        }
    }
}

/// Never answers: the gate's timeout or a cancel ends the wait. For tests only.
#[derive(Debug, Default)]
pub struct UnansweredApprover {
    timeout: Option<Duration>,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl UnansweredApprover {
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the approver its own timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Every request this approver was asked.
    pub fn requests(&self) -> Vec<ApprovalRequest> {
        lock(&self.requests).clone()
    }
}

#[async_trait]
impl Approver for UnansweredApprover {
    fn name(&self) -> &str {
        "unanswered"
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        lock(&self.requests).push(request.clone());
        futures::future::pending().await
    }
}
