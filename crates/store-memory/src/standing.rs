//! Standing grants in process memory: rules 8 to 14 of the proposal-store
//! contract, each under the store's one lock.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, AttemptId, IssueError, MAX_LISTED_PROPOSALS, RunId, StandingGrant,
    StandingId, StandingKey, StandingRevokeOutcome, StandingState, StoredStanding, Timestamp,
    UseOutcome, decide_give_back, decide_use,
};

use crate::{Grants, drop_oldest};

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
}

impl Grants {
    /// How many standing grants `which` selects are usable at `now`
    /// (active, not stopped, unexpired, a use left): what a stop ends.
    pub(crate) fn usable_standing(
        &self,
        now: Timestamp,
        which: impl Fn(&StandingGrant) -> bool,
    ) -> u64 {
        let usable = self
            .standing
            .entries
            .values()
            .filter(|entry| which(&entry.stored.grant))
            // Read in place: a stopped grant is one whose stored state is
            // active and whose fence moved, so it is not usable either.
            .filter(|entry| !self.standing_stopped(entry) && entry.stored.is_usable_at(now))
            .count();
        u64::try_from(usable).unwrap_or(u64::MAX)
    }

    fn standing_stopped(&self, entry: &StandingEntry) -> bool {
        let grant = &entry.stored.grant;
        self.stopped_since(
            &grant.actor_id,
            &grant.run_id,
            entry.run_generation,
            entry.actor_generation,
        )
    }

    fn standing_shown(&self, entry: &StandingEntry) -> StoredStanding {
        let mut stored = entry.stored.clone();
        stored.state = stored.state.shown(self.standing_stopped(entry));
        stored
    }

    pub(crate) fn issue_standing(&mut self, grant: StandingGrant) -> Result<(), IssueError> {
        if self.standing.entries.contains_key(&grant.id) {
            return Err(IssueError::StandingExists(grant.id));
        }
        let run = self.run_fence(&grant.actor_id, &grant.run_id);
        let actor = self.actor_fence(&grant.actor_id);
        if run.stopped || actor.stopped {
            return Err(IssueError::Stopped);
        }
        self.standing
            .by_expiry
            .insert((grant.expires_at, grant.id.clone()));
        self.standing.entries.insert(
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

    pub(crate) fn get_standing(&self, id: &StandingId) -> Option<StoredStanding> {
        self.standing
            .entries
            .get(id)
            .map(|entry| self.standing_shown(entry))
    }

    pub(crate) fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Vec<StoredStanding> {
        let mut usable: Vec<StoredStanding> = self
            .standing
            .entries
            .values()
            .filter(|entry| {
                let grant = &entry.stored.grant;
                grant.actor_id == *actor && grant.run_id == *run
            })
            .map(|entry| self.standing_shown(entry))
            .filter(|stored| stored.is_usable_at(now))
            .collect();
        usable.sort_by(|a, b| {
            (a.grant.issued_at, &a.grant.id).cmp(&(b.grant.issued_at, &b.grant.id))
        });
        usable.truncate(MAX_LISTED_PROPOSALS);
        usable
    }

    pub(crate) fn use_standing(
        &mut self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> UseOutcome {
        let Some(entry) = self.standing.entries.get(id) else {
            return UseOutcome::Unknown;
        };
        let stopped = self.standing_stopped(entry);
        let decision = decide_use(&entry.stored, &entry.abandoned, stopped, key, now, attempt);
        if let Some(entry) = self.standing.entries.get_mut(id) {
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

    pub(crate) fn give_back_use(
        &mut self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> AbandonOutcome {
        let Some(entry) = self.standing.entries.get(id) else {
            return AbandonOutcome::Unknown;
        };
        let stopped = self.standing_stopped(entry);
        let decision = decide_give_back(&entry.stored, &entry.abandoned, stopped, now, attempt);
        if let Some(entry) = self.standing.entries.get_mut(id) {
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

    pub(crate) fn revoke_standing(&mut self, id: &StandingId) -> StandingRevokeOutcome {
        let Some(entry) = self.standing.entries.get(id) else {
            return StandingRevokeOutcome::Unknown;
        };
        if entry.stored.state.shown(self.standing_stopped(entry)) != StandingState::Active {
            return StandingRevokeOutcome::AlreadyEnded;
        }
        if let Some(entry) = self.standing.entries.get_mut(id) {
            entry.stored.state = StandingState::Revoked;
        }
        StandingRevokeOutcome::Revoked
    }
}
