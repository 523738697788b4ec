//! Host controls over live grants: stopping a run or an actor.

/// The answer of [`ApprovalStore::stop_run`](crate::ApprovalStore::stop_run)
/// and [`stop_actor`](crate::ApprovalStore::stop_actor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StopOutcome {
    /// Grants this call stopped that were usable until then: active (not
    /// consumed, revoked, locked or stopped before) and not expired at the
    /// caller's `now`.
    pub stopped_grants: u64,
    /// Standing grants this call stopped that were usable until then:
    /// active (not revoked, locked or stopped before), not expired at the
    /// caller's `now`, with a use left. Counted apart from
    /// `stopped_grants`: each is "up to N more" a person approved, not one
    /// action.
    pub stopped_standing: u64,
    /// Whether the run (or actor) was already stopped before this call.
    pub was_stopped: bool,
}

/// The answer of [`ApprovalStore::resume_run`](crate::ApprovalStore::resume_run)
/// and [`resume_actor`](crate::ApprovalStore::resume_actor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResumeOutcome {
    /// It was stopped; new grants may be issued again. Grants stopped
    /// earlier stay stopped.
    Resumed,
    /// It was not stopped; nothing changed.
    NotStopped,
}
