//! Scenario checks: one rule of the store contract each.
//!
//! Every check takes the store under test, issues its own grants (with fresh
//! random ids, so a store that already holds grants is fine) and returns
//! `Err` naming the step whose answer broke the contract. Times are the wall
//! clock at the start of the check plus offsets, so stores that keep records
//! only for a while past expiry still hold them.

use countersign_approval_core::{
    ApprovalStore, ConsumeOutcome, GrantState, RevokeOutcome, StaleReason, Timestamp,
};

use crate::fixtures::{Ctx, TTL_MS};
use crate::{failure::CheckFailure, model::BindingField};

const OK: ConsumeOutcome = ConsumeOutcome::Consumed { replay: false };
const REPLAY: ConsumeOutcome = ConsumeOutcome::Consumed { replay: true };
const REVOKED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Revoked);
const CONSUMED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Consumed);
const EXPIRED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Expired);
const MISMATCH: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Mismatch);

macro_rules! scenario_names {
    (scenarios [$($scenario:ident),* $(,)?] races [$($race:ident),* $(,)?]) => {
        /// The name of every scenario check, in the order the macro lists them.
        pub const SCENARIO_CHECKS: &[&str] = &[$(stringify!($scenario)),*];
    };
}
crate::__for_each_check!([scenario_names]);

/// An id that was never issued: `consume_once` and `revoke` answer `Unknown`,
/// `get` answers `None`, and none of them creates a record or touches
/// another grant.
pub async fn unknown_id_is_unknown(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("unknown_id_is_unknown", store).await?;
    let other = cx.issue_grant().await?;
    let unknown = cx.unknown_id()?;
    let attempt = cx.attempt()?;
    let binding = other.binding();
    if cx
        .get("get of a never-issued id", &unknown)
        .await?
        .is_some()
    {
        return Err(cx.fail("get of a never-issued id answered a grant, expected None"));
    }
    cx.consume(
        "consume of a never-issued id",
        &unknown,
        &binding,
        cx.at(1),
        &attempt,
        ConsumeOutcome::Unknown,
    )
    .await?;
    cx.revoke(
        "revoke of a never-issued id",
        &unknown,
        RevokeOutcome::Unknown,
    )
    .await?;
    cx.consume(
        "consume of a never-issued id after revoking it",
        &unknown,
        &binding,
        cx.at(2),
        &attempt,
        ConsumeOutcome::Unknown,
    )
    .await?;
    if cx
        .get(
            "get after consume and revoke of a never-issued id",
            &unknown,
        )
        .await?
        .is_some()
    {
        return Err(cx.fail(
            "consume or revoke of a never-issued id created a record: get answered a grant, expected None",
        ));
    }
    cx.stored(
        "the other grant after calls on an unknown id",
        &other,
        GrantState::Active,
    )
    .await
}

/// A revoked grant answers `Stale(Revoked)` to a matching consume, every time.
pub async fn revoked_grant_is_stale_revoked(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("revoked_grant_is_stale_revoked", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    cx.revoke(
        "revoke of an active grant",
        &grant.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.consume(
        "matching consume of a revoked grant",
        &grant.id,
        &grant.binding(),
        cx.at(1),
        &attempt,
        REVOKED,
    )
    .await?;
    cx.consume(
        "second matching consume of a revoked grant",
        &grant.id,
        &grant.binding(),
        cx.at(2),
        &attempt,
        REVOKED,
    )
    .await?;
    cx.stored(
        "a revoked grant after consumes",
        &grant,
        GrantState::Revoked,
    )
    .await
}

/// Once one attempt consumed a grant, any other attempt answers
/// `Stale(Consumed)` (with the same binding or another one), and the grant
/// stays consumed by the first attempt at its time.
pub async fn consumed_grant_is_stale_for_other_attempts(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("consumed_grant_is_stale_for_other_attempts", store).await?;
    let grant = cx.issue_grant().await?;
    let (first, second, third) = (cx.attempt()?, cx.attempt()?, cx.attempt()?);
    let binding = grant.binding();
    cx.consume("first consume", &grant.id, &binding, cx.at(10), &first, OK)
        .await?;
    cx.consume(
        "matching consume by another attempt",
        &grant.id,
        &binding,
        cx.at(20),
        &second,
        CONSUMED,
    )
    .await?;
    cx.consume(
        "mismatching consume by a third attempt",
        &grant.id,
        &cx.fx.mismatched(&binding, BindingField::Actor),
        cx.at(30),
        &third,
        CONSUMED,
    )
    .await?;
    cx.stored(
        "the grant after other attempts",
        &grant,
        GrantState::Consumed {
            at: cx.at(10),
            by: first,
        },
    )
    .await
}

/// At or after `expires_at` a matching consume answers `Stale(Expired)` and
/// changes nothing: `get` still shows the grant `Active`.
pub async fn expired_grant_is_stale_expired(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("expired_grant_is_stale_expired", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    cx.consume(
        "matching consume long after expiry",
        &grant.id,
        &grant.binding(),
        cx.at(TTL_MS + 5_000),
        &attempt,
        EXPIRED,
    )
    .await?;
    cx.consume(
        "matching consume one hour after expiry",
        &grant.id,
        &grant.binding(),
        cx.at(TTL_MS + 3_600_000),
        &attempt,
        EXPIRED,
    )
    .await?;
    cx.stored(
        "an expired grant after refused consumes",
        &grant,
        GrantState::Active,
    )
    .await
}

async fn mismatch_does_not_burn(
    check: &'static str,
    store: &dyn ApprovalStore,
    field: BindingField,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new(check, store).await?;
    let grant = cx.issue_grant().await?;
    let (attempt, other) = (cx.attempt()?, cx.attempt()?);
    let binding = grant.binding();
    let wrong = cx.fx.mismatched(&binding, field);
    let name = field.as_str();
    cx.consume(
        &format!("consume with another {name}"),
        &grant.id,
        &wrong,
        cx.at(10),
        &attempt,
        MISMATCH,
    )
    .await?;
    cx.consume(
        &format!(
            "consume with another {name} by a second attempt after a first mismatch \
             (a mismatch must not burn the grant)"
        ),
        &grant.id,
        &wrong,
        cx.at(11),
        &other,
        MISMATCH,
    )
    .await?;
    cx.stored_with_failures(
        &format!("the grant after {name} mismatches (a mismatch must not burn it)"),
        &grant,
        GrantState::Active,
        2,
    )
    .await?;
    cx.consume(
        &format!("matching consume after {name} mismatches (a mismatch must not burn the grant)"),
        &grant.id,
        &binding,
        cx.at(20),
        &attempt,
        OK,
    )
    .await?;
    cx.stored_with_failures(
        "the grant after the matching consume (it keeps its two failed attempts)",
        &grant,
        GrantState::Consumed {
            at: cx.at(20),
            by: attempt,
        },
        2,
    )
    .await
}

/// A consume whose actor differs answers `Stale(Mismatch)`; the grant stays
/// usable.
pub async fn actor_mismatch_is_stale_and_does_not_burn(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    mismatch_does_not_burn(
        "actor_mismatch_is_stale_and_does_not_burn",
        store,
        BindingField::Actor,
    )
    .await
}

/// A consume whose run differs answers `Stale(Mismatch)`; the grant stays
/// usable.
pub async fn run_mismatch_is_stale_and_does_not_burn(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    mismatch_does_not_burn(
        "run_mismatch_is_stale_and_does_not_burn",
        store,
        BindingField::Run,
    )
    .await
}

/// A consume whose URL differs answers `Stale(Mismatch)`; the grant stays
/// usable.
pub async fn url_mismatch_is_stale_and_does_not_burn(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    mismatch_does_not_burn(
        "url_mismatch_is_stale_and_does_not_burn",
        store,
        BindingField::Url,
    )
    .await
}

/// A consume whose action digest differs answers `Stale(Mismatch)`; the
/// grant stays usable.
pub async fn action_mismatch_is_stale_and_does_not_burn(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    mismatch_does_not_burn(
        "action_mismatch_is_stale_and_does_not_burn",
        store,
        BindingField::Action,
    )
    .await
}

/// The attempt that consumed a grant, asking again with the same binding,
/// answers `Consumed { replay: true }` every time; the consume time stays the
/// first one.
pub async fn replay_by_same_attempt_is_consumed_replay(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("replay_by_same_attempt_is_consumed_replay", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    let binding = grant.binding();
    cx.consume(
        "first consume",
        &grant.id,
        &binding,
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    for (n, offset) in [20, 30, 40].into_iter().enumerate() {
        cx.consume(
            &format!("retry {} of the same attempt", n + 1),
            &grant.id,
            &binding,
            cx.at(offset),
            &attempt,
            REPLAY,
        )
        .await?;
    }
    cx.stored(
        "the grant after retries (consumed at the first time, by the attempt)",
        &grant,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt,
        },
    )
    .await
}

/// The consuming attempt asking again with any binding field changed answers
/// `Stale(Consumed)`, not a replay.
pub async fn replay_with_other_binding_is_stale_consumed(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("replay_with_other_binding_is_stale_consumed", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    let binding = grant.binding();
    cx.consume(
        "first consume",
        &grant.id,
        &binding,
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    for field in BindingField::ALL {
        cx.consume(
            &format!("retry of the same attempt with another {}", field.as_str()),
            &grant.id,
            &cx.fx.mismatched(&binding, field),
            cx.at(20),
            &attempt,
            CONSUMED,
        )
        .await?;
    }
    cx.consume(
        "matching retry of the same attempt after mismatching ones",
        &grant.id,
        &binding,
        cx.at(30),
        &attempt,
        REPLAY,
    )
    .await?;
    cx.stored(
        "the grant after the retries",
        &grant,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt,
        },
    )
    .await
}

/// `revoke` answers `Revoked` for an active grant (even an expired one),
/// `AlreadyRevoked` the second time, `AlreadyConsumed` for a consumed grant
/// (which stays consumed) and `Unknown` for a missing id.
pub async fn revoke_outcomes(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("revoke_outcomes", store).await?;
    let attempt = cx.attempt()?;

    let active = cx.issue_grant().await?;
    cx.revoke(
        "revoke of an active grant",
        &active.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.revoke(
        "second revoke of the grant",
        &active.id,
        RevokeOutcome::AlreadyRevoked,
    )
    .await?;
    cx.stored("a revoked grant", &active, GrantState::Revoked)
        .await?;

    let consumed = cx.issue_grant().await?;
    cx.consume(
        "consume before revoking",
        &consumed.id,
        &consumed.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    cx.revoke(
        "revoke of a consumed grant",
        &consumed.id,
        RevokeOutcome::AlreadyConsumed,
    )
    .await?;
    cx.stored(
        "a consumed grant after a revoke",
        &consumed,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt.clone(),
        },
    )
    .await?;
    cx.consume(
        "retry of the consuming attempt after a revoke",
        &consumed.id,
        &consumed.binding(),
        cx.at(20),
        &attempt,
        REPLAY,
    )
    .await?;

    let unknown = cx.unknown_id()?;
    cx.revoke(
        "revoke of a never-issued id",
        &unknown,
        RevokeOutcome::Unknown,
    )
    .await?;

    // Issued two lifetimes ago: expired by the wall clock before the revoke.
    let expired = cx.grant_at(Timestamp::from_millis(
        cx.t0.as_millis().saturating_sub(2 * TTL_MS),
    ))?;
    cx.issue(&expired).await?;
    cx.revoke(
        "revoke of an expired, unused grant",
        &expired.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.stored(
        "an expired grant after a revoke",
        &expired,
        GrantState::Revoked,
    )
    .await
}

/// Issuing an id that already exists answers `AlreadyExists` and leaves the
/// existing grant untouched, whether it is active, consumed, revoked or
/// expired, and even when the new grant is identical.
pub async fn duplicate_issue_is_refused(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("duplicate_issue_is_refused", store).await?;
    let attempt = cx.attempt()?;
    let overwrite = |original: &countersign_approval_core::Approval| {
        let mut changed = original.clone();
        changed.actor_id = cx.fx.actors[1].clone();
        changed.run_id = cx.fx.runs[1].clone();
        changed.url = cx.fx.urls[1].as_str().to_owned();
        changed.action = cx.fx.actions[1].clone();
        changed.action_digest = cx.fx.actions[1].digest();
        changed.issued_at = cx.at(5);
        changed.expires_at = cx.at(TTL_MS + 3_600_000);
        changed.approver_note = Some("an attempt to overwrite".to_owned());
        changed
    };

    let active = cx.issue_grant().await?;
    cx.issue_duplicate("issue of an identical grant", &active)
        .await?;
    cx.issue_duplicate(
        "issue of another grant with an active id",
        &overwrite(&active),
    )
    .await?;
    cx.stored(
        "an active grant after duplicate issues",
        &active,
        GrantState::Active,
    )
    .await?;
    cx.consume(
        "consume of the original binding after duplicate issues",
        &active.id,
        &active.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    cx.issue_duplicate("issue over a consumed grant", &overwrite(&active))
        .await?;
    cx.issue_duplicate("identical issue over a consumed grant", &active)
        .await?;
    cx.stored(
        "a consumed grant after duplicate issues",
        &active,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt.clone(),
        },
    )
    .await?;

    let revoked = cx.issue_grant().await?;
    cx.revoke(
        "revoke before the duplicate issue",
        &revoked.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.issue_duplicate("issue over a revoked grant", &overwrite(&revoked))
        .await?;
    cx.issue_duplicate("identical issue over a revoked grant", &revoked)
        .await?;
    cx.stored(
        "a revoked grant after duplicate issues",
        &revoked,
        GrantState::Revoked,
    )
    .await?;
    cx.consume(
        "consume of a revoked grant after duplicate issues",
        &revoked.id,
        &revoked.binding(),
        cx.at(20),
        &attempt,
        REVOKED,
    )
    .await?;

    let expired = cx.grant_at(Timestamp::from_millis(
        cx.t0.as_millis().saturating_sub(2 * TTL_MS),
    ))?;
    cx.issue(&expired).await?;
    cx.issue_duplicate("issue over an expired grant", &overwrite(&expired))
        .await?;
    cx.stored(
        "an expired grant after a duplicate issue",
        &expired,
        GrantState::Active,
    )
    .await?;
    cx.consume(
        "consume of an expired grant after a duplicate issue",
        &expired.id,
        &expired.binding(),
        cx.at(30),
        &attempt,
        EXPIRED,
    )
    .await
}

/// Any number of `get`s leave a grant as it was: an active grant stays
/// consumable, a consumed one stays consumed by the same attempt, a revoked
/// one stays revoked.
pub async fn reads_never_consume(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("reads_never_consume", store).await?;
    let grant = cx.issue_grant().await?;
    let (attempt, other) = (cx.attempt()?, cx.attempt()?);
    for n in 1..=25 {
        cx.stored(
            &format!("read {n} of an active grant"),
            &grant,
            GrantState::Active,
        )
        .await?;
    }
    cx.consume(
        "consume after 25 reads (reads must not consume)",
        &grant.id,
        &grant.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    let consumed = GrantState::Consumed {
        at: cx.at(10),
        by: attempt.clone(),
    };
    for n in 1..=5 {
        cx.stored(
            &format!("read {n} of a consumed grant"),
            &grant,
            consumed.clone(),
        )
        .await?;
    }
    cx.consume(
        "retry of the consuming attempt after reads",
        &grant.id,
        &grant.binding(),
        cx.at(20),
        &attempt,
        REPLAY,
    )
    .await?;
    cx.consume(
        "another attempt after reads",
        &grant.id,
        &grant.binding(),
        cx.at(20),
        &other,
        CONSUMED,
    )
    .await?;

    let revoked = cx.issue_grant().await?;
    cx.revoke("revoke", &revoked.id, RevokeOutcome::Revoked)
        .await?;
    for n in 1..=5 {
        cx.stored(
            &format!("read {n} of a revoked grant"),
            &revoked,
            GrantState::Revoked,
        )
        .await?;
    }
    cx.revoke(
        "revoke after reads",
        &revoked.id,
        RevokeOutcome::AlreadyRevoked,
    )
    .await
}

/// `get` answers the grant exactly as issued, field for field (ids at their
/// longest, non-ASCII text, an approver note at its longest, an empty note,
/// no note, an action with arguments, a page binding at its longest with an
/// element identity full of quotes, non-ASCII and bidi characters in two
/// frames), and the state exactly: `Active`, `Revoked`, `Consumed { at, by }`.
pub async fn get_round_trips_grant_and_state(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    use countersign_approval_core::{ActorId, Approval, RunId};

    let cx = Ctx::new("get_round_trips_grant_and_state", store).await?;
    let attempt = cx.attempt()?;
    let fail =
        |what: &str, e: &dyn std::fmt::Display| cx.fail(format!("could not build {what}: {e}"));

    // 128 two-byte characters: 256 bytes, the longest actor id.
    let actor = ActorId::new("ä".repeat(128)).map_err(|e| fail("the actor", &e))?;
    // Exactly 256 bytes, with quotes and a three-byte character.
    let run_text = format!(
        "run \"quoted\" {} ✓",
        "r".repeat(256 - "run \"quoted\"  ✓".len())
    );
    let run = RunId::new(run_text).map_err(|e| fail("the run", &e))?;
    let policy = countersign_canonical_policy::Policy::builder()
        .allow_host("shop.example.com")
        .resolver(countersign_canonical_policy::StaticResolver::answering_all(
            [std::net::IpAddr::from([93, 184, 216, 34])],
        ))
        .build()
        .map_err(|e| fail("the policy", &e))?;
    let url = policy
        .authorize_destination("https://shop.example.com/a%20b/ü?q=1&r=\"x\"#frag")
        .await
        .map_err(|e| fail("the url", &e))?;
    let action = policy
        .authorize_action(&serde_json::json!({
            "method": "fill",
            "selector": "input[name=\"note\"] > ü",
            "description": "fill the note with «ünïcødé», \"quotes\" and \\ backslashes",
            "arguments": {
                "value": "line one\nline two\t\"quoted\" \\ back \u{0} nul 😀",
                "empty": "",
                "number": 42,
                "flag": true
            }
        }))
        .map_err(|e| fail("the action", &e))?;
    // Exactly 1024 bytes, the longest note.
    let note = format!(
        "note «{}» \"end\"",
        "n".repeat(countersign_approval_core::MAX_NOTE_BYTES - "note «» \"end\"".len())
    );
    // Bound to a page, with the longest ids (`session_id` holds `session/tab`).
    let page = countersign_approval_core::PageBinding {
        session_id: "S".repeat(countersign_approval_core::MAX_PAGE_ID_BYTES),
        target_id: "T".repeat(countersign_approval_core::MAX_PAGE_ID_BYTES),
        page_revision: "R~!\"#$%&'()*+,-.:;<=>?@[]^_`{|}".to_owned(),
        element: Some(crate::fixtures::element(cx.check)?),
    };
    let approver = countersign_approval_core::ApproverId::new("host-user:42 «reviewer»")
        .map_err(|e| fail("the approver", &e))?;
    let rich = Approval::for_action(actor, run, &url, &action, crate::fixtures::TTL, cx.t0)
        .and_then(|a| a.with_note(note))
        .and_then(|a| {
            a.approved_by(
                approver,
                cx.t0.saturating_sub(std::time::Duration::from_millis(1)),
            )
        })
        .and_then(|a| a.with_attempt_limit(2))
        .and_then(|a| a.bound_to_page(&page))
        .map_err(|e| fail("the grant", &e))?;
    let plain = cx.grant_at(cx.at(1))?;
    let empty_note = cx
        .grant_at(cx.at(2))?
        .with_note("")
        .map_err(|e| fail("the grant", &e))?;

    for grant in [&rich, &plain, &empty_note] {
        cx.issue(grant).await?;
    }
    cx.stored(
        "a grant with every field at its richest",
        &rich,
        GrantState::Active,
    )
    .await?;
    cx.stored("a grant without a note", &plain, GrantState::Active)
        .await?;
    cx.stored(
        "a grant with an empty note",
        &empty_note,
        GrantState::Active,
    )
    .await?;

    cx.revoke("revoke", &rich.id, RevokeOutcome::Revoked)
        .await?;
    cx.stored("the rich grant, revoked", &rich, GrantState::Revoked)
        .await?;
    cx.consume(
        "consume",
        &plain.id,
        &plain.binding(),
        cx.at(7),
        &attempt,
        OK,
    )
    .await?;
    cx.stored(
        "the plain grant, consumed",
        &plain,
        GrantState::Consumed {
            at: cx.at(7),
            by: attempt.clone(),
        },
    )
    .await?;
    cx.consume(
        "consume of the rich grant's binding on the empty-note grant",
        &empty_note.id,
        &rich.binding(),
        cx.at(8),
        &attempt,
        MISMATCH,
    )
    .await?;
    cx.stored_with_failures(
        "the empty-note grant after a mismatch",
        &empty_note,
        GrantState::Active,
        1,
    )
    .await
}

/// `expires_at - 1` is the last instant a grant can be consumed;
/// `expires_at` is already expired.
pub async fn expiry_boundary(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("expiry_boundary", store).await?;
    let attempt = cx.attempt()?;
    let last = cx.issue_grant().await?;
    cx.consume(
        "consume at expires_at - 1",
        &last.id,
        &last.binding(),
        cx.at(TTL_MS - 1),
        &attempt,
        OK,
    )
    .await?;
    cx.stored(
        "the grant consumed at expires_at - 1",
        &last,
        GrantState::Consumed {
            at: cx.at(TTL_MS - 1),
            by: attempt.clone(),
        },
    )
    .await?;
    let first = cx.issue_grant().await?;
    cx.consume(
        "consume at expires_at",
        &first.id,
        &first.binding(),
        first.expires_at,
        &attempt,
        EXPIRED,
    )
    .await?;
    cx.stored(
        "the grant refused at expires_at",
        &first,
        GrantState::Active,
    )
    .await
}

/// A revoked grant answers `Stale(Revoked)` even when it is also expired
/// or the binding differs.
pub async fn revoked_is_checked_before_expiry(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("revoked_is_checked_before_expiry", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    cx.revoke("revoke", &grant.id, RevokeOutcome::Revoked)
        .await?;
    cx.consume(
        "matching consume of a revoked grant after expiry",
        &grant.id,
        &grant.binding(),
        cx.at(TTL_MS + 1),
        &attempt,
        REVOKED,
    )
    .await?;
    cx.consume(
        "mismatching consume of a revoked grant after expiry",
        &grant.id,
        &cx.fx.mismatched(&grant.binding(), BindingField::Url),
        cx.at(TTL_MS + 1),
        &attempt,
        REVOKED,
    )
    .await?;
    cx.consume(
        "mismatching consume of a revoked grant before expiry",
        &grant.id,
        &cx.fx.mismatched(&grant.binding(), BindingField::Action),
        cx.at(1),
        &attempt,
        REVOKED,
    )
    .await
}

/// A consumed grant answers a replay to its attempt and `Stale(Consumed)` to
/// others even after it expired: the consumed state is checked before
/// expiry.
pub async fn consumed_is_checked_before_expiry(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("consumed_is_checked_before_expiry", store).await?;
    let grant = cx.issue_grant().await?;
    let (attempt, other) = (cx.attempt()?, cx.attempt()?);
    cx.consume(
        "consume before expiry",
        &grant.id,
        &grant.binding(),
        cx.at(1),
        &attempt,
        OK,
    )
    .await?;
    cx.consume(
        "retry of the consuming attempt after expiry",
        &grant.id,
        &grant.binding(),
        cx.at(TTL_MS + 1),
        &attempt,
        REPLAY,
    )
    .await?;
    cx.consume(
        "another attempt after expiry",
        &grant.id,
        &grant.binding(),
        cx.at(TTL_MS + 1),
        &other,
        CONSUMED,
    )
    .await
}

/// An expired grant answers `Stale(Expired)` even when the binding also
/// differs, for every field.
pub async fn expiry_is_checked_before_mismatch(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("expiry_is_checked_before_mismatch", store).await?;
    let grant = cx.issue_grant().await?;
    let attempt = cx.attempt()?;
    for field in BindingField::ALL {
        cx.consume(
            &format!("consume with another {} after expiry", field.as_str()),
            &grant.id,
            &cx.fx.mismatched(&grant.binding(), field),
            grant.expires_at,
            &attempt,
            EXPIRED,
        )
        .await?;
    }
    cx.stored(
        "the grant after refused consumes",
        &grant,
        GrantState::Active,
    )
    .await
}

/// Grants with the same binding are independent: consuming or revoking one
/// leaves the others as they were, and one attempt id may consume several
/// grants.
pub async fn grants_are_independent(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("grants_are_independent", store).await?;
    let attempt = cx.attempt()?;
    let first = cx.issue_grant().await?;
    let second = cx.issue_grant().await?;
    let third = cx.issue_grant().await?;
    cx.consume(
        "consume of the first grant",
        &first.id,
        &first.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    cx.stored(
        "the second grant after the first was consumed",
        &second,
        GrantState::Active,
    )
    .await?;
    cx.revoke(
        "revoke of the third grant",
        &third.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.consume(
        "consume of the second grant by the attempt that consumed the first",
        &second.id,
        &second.binding(),
        cx.at(20),
        &attempt,
        OK,
    )
    .await?;
    cx.stored(
        "the first grant",
        &first,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt.clone(),
        },
    )
    .await?;
    cx.stored(
        "the second grant",
        &second,
        GrantState::Consumed {
            at: cx.at(20),
            by: attempt,
        },
    )
    .await?;
    cx.stored("the third grant", &third, GrantState::Revoked)
        .await
}

/// A grant with every field at its maximum size reads back exactly and is
/// consumed exactly once, like any other: ids of 128 and 256 bytes, a
/// 1024-byte note, a long URL, a 2048-byte selector whose default
/// description is longer than an explicit one may be, a 1024-byte explicit
/// description, 32 arguments with 64-byte keys and 8192-byte values full
/// of characters JSON escapes, and a bound element with every field at its
/// bound. Every store must give the outcomes an
/// ordinary grant gets; one that cannot read such a grant back would fail
/// here.
pub async fn every_field_at_its_maximum(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    use countersign_approval_core::{
        ActorId, Approval, ApprovalId, ApproverId, AttemptId, MAX_ATTEMPT_LIMIT, MAX_HOST_ID_BYTES,
        MAX_NOTE_BYTES, MAX_PAGE_ID_BYTES, MAX_TTL, PageBinding, RunId,
    };
    use countersign_canonical_policy::{
        MAX_ARGUMENT_KEY_BYTES, MAX_ARGUMENT_VALUE_BYTES, MAX_ARGUMENTS, MAX_DESCRIPTION_BYTES,
        MAX_SELECTOR_BYTES,
    };

    let cx = Ctx::new("every_field_at_its_maximum", store).await?;
    let fail =
        |what: &str, e: &dyn std::fmt::Display| cx.fail(format!("could not build {what}: {e}"));
    // Exactly `bytes` bytes: `pattern` repeated, then ASCII filler.
    let sized = |pattern: &str, bytes: usize| {
        let mut text = pattern.repeat(bytes / pattern.len());
        text.push_str(&"z".repeat(bytes - text.len()));
        text
    };

    let actor =
        ActorId::new(sized("actor «ä» ", MAX_HOST_ID_BYTES)).map_err(|e| fail("the actor", &e))?;
    let run =
        RunId::new(sized("run \"ü\" ", MAX_HOST_ID_BYTES)).map_err(|e| fail("the run", &e))?;
    let policy = countersign_canonical_policy::Policy::builder()
        .allow_host("*.example.com")
        .resolver(countersign_canonical_policy::StaticResolver::answering_all(
            [std::net::IpAddr::from([93, 184, 216, 34])],
        ))
        .build()
        .map_err(|e| fail("the policy", &e))?;
    let url = policy
        .authorize_destination(&format!(
            "https://{}.example.com/{}?q={}#{}",
            "a".repeat(63),
            "p%20ü/".repeat(700),
            "\"x\"&".repeat(700),
            "f".repeat(1000)
        ))
        .await
        .map_err(|e| fail("the url", &e))?;
    // Values with quotes, backslashes, controls, U+2028 and 4-byte characters.
    let value = sized("\"\\\u{0}\n\t\u{2028}😀é ", MAX_ARGUMENT_VALUE_BYTES);
    let arguments: serde_json::Map<String, serde_json::Value> = (0..MAX_ARGUMENTS)
        .map(|i| {
            let key = format!("{i:0>width$}", width = MAX_ARGUMENT_KEY_BYTES);
            (key, serde_json::Value::String(value.clone()))
        })
        .collect();
    let selector = sized("div[data-x=\"ü\\\\\"] > ", MAX_SELECTOR_BYTES);
    // No description: the default, `dblclick` and the selector, is 2057 bytes.
    let default_described = policy
        .authorize_action(&serde_json::json!({
            "method": "dblclick", "selector": selector, "arguments": arguments,
        }))
        .map_err(|e| fail("the action with the default description", &e))?;
    let described = policy
        .authorize_action(&serde_json::json!({
            "method": "dblclick", "selector": selector, "arguments": arguments,
            "description": sized("«described» \"", MAX_DESCRIPTION_BYTES),
        }))
        .map_err(|e| fail("the action with a description", &e))?;

    let element = crate::fixtures::largest_element(cx.check)?;
    let approver = ApproverId::new(sized("approver «ü» \"\\ ", MAX_HOST_ID_BYTES))
        .map_err(|e| fail("the approver", &e))?;
    let longest_id = |prefix: &str| format!("{prefix}{}", "9".repeat(128 - prefix.len()));
    let mut grants = Vec::new();
    for (i, action) in [&default_described, &described].into_iter().enumerate() {
        let mut grant =
            Approval::for_action(actor.clone(), run.clone(), &url, action, MAX_TTL, cx.t0)
                .and_then(|a| a.with_note(sized("note «✓» \"", MAX_NOTE_BYTES)))
                .and_then(|a| a.approved_by(approver.clone(), cx.t0))
                .and_then(|a| a.with_attempt_limit(MAX_ATTEMPT_LIMIT))
                .and_then(|a| {
                    // Page ids at their maximum, with the quotes and
                    // backslashes a record encoding must escape.
                    a.bound_to_page(&PageBinding {
                        session_id: sized("s\"\\{}:", MAX_PAGE_ID_BYTES),
                        target_id: sized("t'\\,;", MAX_PAGE_ID_BYTES),
                        page_revision: sized("r\"%\\", MAX_PAGE_ID_BYTES),
                        element: Some(element.clone()),
                    })
                })
                .map_err(|e| fail("the grant", &e))?;
        // A 128-character id, unique to this run of the check.
        let unique = cx.unknown_id()?;
        grant.id = ApprovalId::parse(&longest_id(&format!("{unique}_{i}_")))
            .ok_or_else(|| cx.fail("could not build a 128-character id"))?;
        cx.issue(&grant).await?;
        cx.stored("a maximal grant, as issued", &grant, GrantState::Active)
            .await?;
        grants.push(grant);
    }
    let attempt = AttemptId::parse(&longest_id(cx.attempt()?.as_str()))
        .ok_or_else(|| cx.fail("could not build a 128-character attempt id"))?;
    let other = cx.attempt()?;

    for grant in &grants {
        // The other grant's action differs by its description only.
        let mut mismatched = grant.binding();
        mismatched.action_digest = if grant.action_digest == default_described.digest() {
            described.digest()
        } else {
            default_described.digest()
        };
        cx.consume(
            "consume with the other maximal action",
            &grant.id,
            &mismatched,
            cx.at(1),
            &attempt,
            MISMATCH,
        )
        .await?;
        cx.stored_with_failures(
            "the maximal grant after a mismatch",
            grant,
            GrantState::Active,
            1,
        )
        .await?;
    }

    let [first, second] = &grants[..] else {
        return Err(cx.fail("expected two grants"));
    };
    cx.consume(
        "consume of the maximal grant with the default description",
        &first.id,
        &first.binding(),
        cx.at(2),
        &attempt,
        OK,
    )
    .await?;
    cx.stored_with_failures(
        "the consumed maximal grant",
        first,
        GrantState::Consumed {
            at: cx.at(2),
            by: attempt.clone(),
        },
        1,
    )
    .await?;
    cx.consume(
        "replay by the same attempt",
        &first.id,
        &first.binding(),
        cx.at(3),
        &attempt,
        REPLAY,
    )
    .await?;
    cx.consume(
        "consume by another attempt",
        &first.id,
        &first.binding(),
        cx.at(3),
        &other,
        CONSUMED,
    )
    .await?;
    cx.revoke(
        "revoke of the consumed maximal grant",
        &first.id,
        RevokeOutcome::AlreadyConsumed,
    )
    .await?;

    cx.revoke(
        "revoke of the described maximal grant",
        &second.id,
        RevokeOutcome::Revoked,
    )
    .await?;
    cx.stored_with_failures("the revoked maximal grant", second, GrantState::Revoked, 1)
        .await?;
    cx.consume(
        "consume of the revoked maximal grant",
        &second.id,
        &second.binding(),
        cx.at(4),
        &other,
        REVOKED,
    )
    .await
}

mod control;
pub use control::{
    approver_and_attempt_limit_round_trip, failed_attempts_lock_the_grant,
    stop_actor_stops_every_run, stop_run_stops_its_grants_and_only_them,
    stopped_run_refuses_issue_until_resumed,
};

mod abandon;
pub use abandon::{
    abandon_of_own_consume_restores_the_grant, abandon_outcomes, abandoned_attempts_are_bounded,
    late_consume_of_abandoned_attempt_never_consumes,
};
