//! The stop fences of runs and actors: every stop moves a fence's
//! generation on, so a record made before any stop is stopped for good,
//! also after a resume.

use std::collections::HashMap;

use countersign_approval_core::{ActorId, ResumeOutcome, RunId, StopOutcome};

/// A run's or an actor's stop fence.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fence {
    pub(crate) generation: u64,
    pub(crate) stopped: bool,
}

impl Fence {
    /// Stops the fence: moves its generation on (every record made before
    /// is stopped for good) and marks it stopped.
    pub(crate) fn stop(&mut self, stopped_grants: u64, stopped_standing: u64) -> StopOutcome {
        let was_stopped = self.stopped;
        self.generation += 1;
        self.stopped = true;
        StopOutcome {
            stopped_grants,
            stopped_standing,
            was_stopped,
        }
    }
}

/// Clears a fence's stop, keeping its generation (stopped records stay
/// stopped).
pub(crate) fn resume(fence: Option<&mut Fence>) -> ResumeOutcome {
    match fence {
        Some(fence) if fence.stopped => {
            fence.stopped = false;
            ResumeOutcome::Resumed
        }
        _ => ResumeOutcome::NotStopped,
    }
}

/// Every fence, of runs by actor then run (looked up with borrowed ids),
/// and of actors.
#[derive(Debug, Default)]
pub(crate) struct Fences {
    pub(crate) runs: HashMap<ActorId, HashMap<RunId, Fence>>,
    pub(crate) actors: HashMap<ActorId, Fence>,
}

impl Fences {
    /// Whether a run or actor stop came since these generations were taken.
    pub(crate) fn stopped_since(
        &self,
        actor: &ActorId,
        run: &RunId,
        run_generation: u64,
        actor_generation: u64,
    ) -> bool {
        // No stop ever: nothing to look up on the hot path.
        if self.runs.is_empty() && self.actors.is_empty() {
            return false;
        }
        let run_now = self
            .runs
            .get(actor)
            .and_then(|runs| runs.get(run))
            .map_or(0, |fence| fence.generation);
        let actor_now = self.actors.get(actor).map_or(0, |fence| fence.generation);
        run_now != run_generation || actor_now != actor_generation
    }

    /// The fence of `run` of `actor` (generation 0, not stopped, when it
    /// was never stopped).
    pub(crate) fn run(&self, actor: &ActorId, run: &RunId) -> Fence {
        self.runs
            .get(actor)
            .and_then(|runs| runs.get(run))
            .copied()
            .unwrap_or_default()
    }

    /// The fence of `actor`.
    pub(crate) fn actor(&self, actor: &ActorId) -> Fence {
        self.actors.get(actor).copied().unwrap_or_default()
    }
}
