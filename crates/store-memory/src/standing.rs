//! Standing grants in process memory: rules 8 to 14 of the proposal-store
//! contract, each under the store's one lock.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, AttemptId, IssueError, MAX_LISTED_PROPOSALS, RunId, StandingGrant,
    StandingId, StandingKey, StandingRevokeOutcome, StandingState, StoredStanding, Timestamp,
    UseOutcome, decide_give_back, decide_use,
};

use crate::expiry::drop_oldest;
use crate::fences::Fences;

/// One standing grant, the attempts given back on it, and the generations
/// of its run and actor when it was issued.
#[derive(Debug)]
struct StandingEntry {
    stored: StoredStanding,
    abandoned: Vec<AttemptId>,
    run_generation: u64,
    actor_generation: u64,
}

/// The standing grants a store holds.
#[derive(Debug, Default)]
pub(crate) struct StandingGrants {
    entries: HashMap<StandingId, StandingEntry>,
    /// By expiry: a standing grant is used only before it expires.
    by_expiry: BTreeSet<(Timestamp, StandingId)>,
}

impl StandingGrants {
    /// Drops at most `limit` standing grants expired for `retention`.
    pub(crate) fn purge(&mut self, now: Timestamp, retention: Duration, limit: usize) {
        let StandingGrants {
            entries, by_expiry, ..
        } = self;
        drop_oldest(by_expiry, now, retention, limit, |id| {
            entries.remove(&id);
        });
    }

    /// How many standing grants `which` selects are usable at `now`
    /// (active, not stopped, unexpired, a use left): what a stop ends.
    pub(crate) fn usable(
        &self,
        fences: &Fences,
        now: Timestamp,
        which: impl Fn(&StandingGrant) -> bool,
    ) -> u64 {
        let usable = self
            .entries
            .values()
            .filter(|entry| which(&entry.stored.grant))
            // Read in place: a stopped grant is one whose stored state is
            // active and whose fence moved, so it is not usable either.
            .filter(|entry| !stopped(fences, entry) && entry.stored.is_usable_at(now))
            .count();
        u64::try_from(usable).unwrap_or(u64::MAX)
    }

    /// Issues `grant` unless its id is taken or its run or actor is
    /// stopped.
    pub(crate) fn issue(
        &mut self,
        fences: &Fences,
        grant: StandingGrant,
    ) -> Result<(), IssueError> {
        if self.entries.contains_key(&grant.id) {
            return Err(IssueError::StandingExists(grant.id));
        }
        let run = fences.run(&grant.actor_id, &grant.run_id);
        let actor = fences.actor(&grant.actor_id);
        if run.stopped || actor.stopped {
            return Err(IssueError::Stopped);
        }
        self.by_expiry.insert((grant.expires_at, grant.id.clone()));
        self.entries.insert(
            grant.id.clone(),
            StandingEntry {
                stored: StoredStanding::issued(grant),
                abandoned: Vec::new(),
                run_generation: run.generation,
                actor_generation: actor.generation,
            },
        );
        Ok(())
    }

    /// The standing grant `id`, its state as shown (stopped when its fences
    /// moved).
    pub(crate) fn get(&self, fences: &Fences, id: &StandingId) -> Option<StoredStanding> {
        self.entries.get(id).map(|entry| shown(fences, entry))
    }

    /// The usable standing grants of `run` of `actor`, oldest first.
    pub(crate) fn usable_of_run(
        &self,
        fences: &Fences,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Vec<StoredStanding> {
        let mut usable: Vec<StoredStanding> = self
            .entries
            .values()
            .filter(|entry| {
                let grant = &entry.stored.grant;
                grant.actor_id == *actor && grant.run_id == *run
            })
            .map(|entry| shown(fences, entry))
            .filter(|stored| stored.is_usable_at(now))
            .collect();
        usable.sort_by(|a, b| {
            (a.grant.issued_at, &a.grant.id).cmp(&(b.grant.issued_at, &b.grant.id))
        });
        usable.truncate(MAX_LISTED_PROPOSALS);
        usable
    }

    /// Takes one use of `id` for `attempt` (`decide_use`).
    pub(crate) fn use_one(
        &mut self,
        fences: &Fences,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> UseOutcome {
        let Some(entry) = self.entries.get(id) else {
            return UseOutcome::Unknown;
        };
        let stopped = stopped(fences, entry);
        let decision = decide_use(&entry.stored, &entry.abandoned, stopped, key, now, attempt);
        if let Some(entry) = self.entries.get_mut(id) {
            if decision.record_use {
                entry.stored.used_by.push(attempt.clone());
            }
            if let Some(state) = decision.state {
                entry.stored.state = state;
            }
            if let Some(failed) = decision.failed_attempts {
                entry.stored.failed_attempts = failed;
            }
        }
        decision.outcome
    }

    /// Gives back `attempt`'s use of `id` (`decide_give_back`).
    pub(crate) fn give_back(
        &mut self,
        fences: &Fences,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> AbandonOutcome {
        let Some(entry) = self.entries.get(id) else {
            return AbandonOutcome::Unknown;
        };
        let stopped = stopped(fences, entry);
        let decision = decide_give_back(&entry.stored, &entry.abandoned, stopped, now, attempt);
        if let Some(entry) = self.entries.get_mut(id) {
            if decision.release_use {
                entry.stored.used_by.retain(|used| used != attempt);
            }
            if decision.remember {
                entry.abandoned.push(attempt.clone());
            }
            if let Some(state) = decision.state {
                entry.stored.state = state;
            }
        }
        decision.outcome
    }

    /// Revokes `id` unless it already ended.
    pub(crate) fn revoke(&mut self, fences: &Fences, id: &StandingId) -> StandingRevokeOutcome {
        let Some(entry) = self.entries.get(id) else {
            return StandingRevokeOutcome::Unknown;
        };
        if entry.stored.state.shown(stopped(fences, entry)) != StandingState::Active {
            return StandingRevokeOutcome::AlreadyEnded;
        }
        if let Some(entry) = self.entries.get_mut(id) {
            entry.stored.state = StandingState::Revoked;
        }
        StandingRevokeOutcome::Revoked
    }
}

/// Whether the standing grant of `entry` was stopped since it was issued.
fn stopped(fences: &Fences, entry: &StandingEntry) -> bool {
    let grant = &entry.stored.grant;
    fences.stopped_since(
        &grant.actor_id,
        &grant.run_id,
        entry.run_generation,
        entry.actor_generation,
    )
}

/// The standing grant of `entry` with its state as shown.
fn shown(fences: &Fences, entry: &StandingEntry) -> StoredStanding {
    let mut stored = entry.stored.clone();
    stored.state = stored.state.shown(stopped(fences, entry));
    stored
}
