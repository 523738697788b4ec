//! Scenario checks for `abandon`: rule 8 of the store contract.

use countersign_approval_core::{
    AbandonOutcome, ApprovalStore, ConsumeOutcome, GrantState, MAX_ABANDONED_ATTEMPTS,
    RevokeOutcome, StaleReason,
};

use crate::failure::CheckFailure;
use crate::fixtures::{Ctx, TTL_MS};

const OK: ConsumeOutcome = ConsumeOutcome::Consumed { replay: false };
const ABANDONED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Abandoned);
const RESTORED: AbandonOutcome = AbandonOutcome::Usable { restored: true };
const USABLE: AbandonOutcome = AbandonOutcome::Usable { restored: false };

/// Abandoning the attempt that consumed a grant makes it active again
/// (`Usable { restored: true }`); a repeat answers `Usable { restored: false }`
/// and changes nothing; that attempt's retries answer `Stale(Abandoned)`;
/// another attempt then consumes it.
pub async fn abandon_of_own_consume_restores_the_grant(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("abandon_of_own_consume_restores_the_grant", store).await?;
    let grant = cx.issue_grant().await?;
    let (first, second) = (cx.attempt()?, cx.attempt()?);
    let binding = grant.binding();
    cx.consume("first consume", &grant.id, &binding, cx.at(10), &first, OK)
        .await?;
    cx.abandon(
        "abandon of the consuming attempt",
        &grant.id,
        &first,
        cx.at(20),
        RESTORED,
    )
    .await?;
    cx.stored(
        "the grant after its consume was abandoned",
        &grant,
        GrantState::Active,
    )
    .await?;
    cx.abandon(
        "repeat of the abandon",
        &grant.id,
        &first,
        cx.at(30),
        USABLE,
    )
    .await?;
    cx.consume(
        "retry of the abandoned attempt",
        &grant.id,
        &binding,
        cx.at(40),
        &first,
        ABANDONED,
    )
    .await?;
    cx.stored(
        "the grant after a retry of the abandoned attempt",
        &grant,
        GrantState::Active,
    )
    .await?;
    cx.consume(
        "consume by another attempt",
        &grant.id,
        &binding,
        cx.at(50),
        &second,
        OK,
    )
    .await?;
    cx.stored(
        "the grant consumed by the other attempt",
        &grant,
        GrantState::Consumed {
            at: cx.at(50),
            by: second,
        },
    )
    .await
}

/// An attempt abandoned before its consume reaches the store (the consume
/// was sent, its answer lost, and it arrives late) never consumes: every
/// consume by it answers `Stale(Abandoned)`, whatever the binding, and the
/// grant stays active for another attempt.
pub async fn late_consume_of_abandoned_attempt_never_consumes(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("late_consume_of_abandoned_attempt_never_consumes", store).await?;
    let grant = cx.issue_grant().await?;
    let (late, other) = (cx.attempt()?, cx.attempt()?);
    let binding = grant.binding();
    cx.abandon(
        "abandon before the attempt's consume arrives",
        &grant.id,
        &late,
        cx.at(10),
        USABLE,
    )
    .await?;
    for (n, offset) in [20, 30].into_iter().enumerate() {
        cx.consume(
            &format!("late consume {} of the abandoned attempt", n + 1),
            &grant.id,
            &binding,
            cx.at(offset),
            &late,
            ABANDONED,
        )
        .await?;
    }
    cx.stored(
        "the grant after late consumes of an abandoned attempt",
        &grant,
        GrantState::Active,
    )
    .await?;
    cx.consume(
        "consume by another attempt",
        &grant.id,
        &binding,
        cx.at(40),
        &other,
        OK,
    )
    .await
}

/// The outcomes for grants this attempt does not hold: an unknown id is
/// `Unknown` and creates nothing; a revoked grant is `Revoked` and stays
/// revoked; one consumed by another attempt is `ConsumedByOther` and stays
/// consumed — and the abandoned attempt is remembered, so once the other
/// attempt's consume is abandoned too it still cannot consume; an expired
/// grant is `Expired` (a consume by the attempt is undone all the same).
pub async fn abandon_outcomes(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("abandon_outcomes", store).await?;
    let (a, b, c) = (cx.attempt()?, cx.attempt()?, cx.attempt()?);

    let unknown = cx.unknown_id()?;
    cx.abandon(
        "abandon on a never-issued id",
        &unknown,
        &a,
        cx.at(1),
        AbandonOutcome::Unknown,
    )
    .await?;
    if cx
        .get("get after abandon of a never-issued id", &unknown)
        .await?
        .is_some()
    {
        return Err(cx.fail(
            "abandon of a never-issued id created a record: get answered a grant, expected None",
        ));
    }

    let revoked = cx.issue_grant().await?;
    cx.revoke("revoke before abandon", &revoked.id, RevokeOutcome::Revoked)
        .await?;
    cx.abandon(
        "abandon on a revoked grant",
        &revoked.id,
        &a,
        cx.at(2),
        AbandonOutcome::Revoked,
    )
    .await?;
    cx.stored(
        "a revoked grant after abandon",
        &revoked,
        GrantState::Revoked,
    )
    .await?;

    let taken = cx.issue_grant().await?;
    let binding = taken.binding();
    cx.consume(
        "consume by another attempt",
        &taken.id,
        &binding,
        cx.at(10),
        &b,
        OK,
    )
    .await?;
    cx.abandon(
        "abandon on a grant another attempt consumed",
        &taken.id,
        &a,
        cx.at(20),
        AbandonOutcome::ConsumedByOther,
    )
    .await?;
    cx.stored(
        "the grant after abandon by a non-consuming attempt",
        &taken,
        GrantState::Consumed {
            at: cx.at(10),
            by: b.clone(),
        },
    )
    .await?;
    cx.abandon(
        "abandon of the consuming attempt",
        &taken.id,
        &b,
        cx.at(30),
        RESTORED,
    )
    .await?;
    cx.consume(
        "late consume of the attempt abandoned while another held the grant",
        &taken.id,
        &binding,
        cx.at(40),
        &a,
        ABANDONED,
    )
    .await?;
    cx.stored(
        "the grant after both attempts were abandoned",
        &taken,
        GrantState::Active,
    )
    .await?;

    let expiring = cx.issue_grant().await?;
    cx.consume(
        "consume before expiry",
        &expiring.id,
        &expiring.binding(),
        cx.at(10),
        &a,
        OK,
    )
    .await?;
    cx.abandon(
        "abandon of the consuming attempt at expires_at",
        &expiring.id,
        &a,
        cx.at(TTL_MS),
        AbandonOutcome::Expired,
    )
    .await?;
    cx.stored(
        "an expired grant whose consume was abandoned",
        &expiring,
        GrantState::Active,
    )
    .await?;
    cx.abandon(
        "abandon of another attempt on an expired grant",
        &expiring.id,
        &c,
        cx.at(TTL_MS + 1),
        AbandonOutcome::Expired,
    )
    .await
}

/// A grant remembers at most `MAX_ABANDONED_ATTEMPTS` abandoned attempts;
/// one more revokes an active grant, and leaves a grant consumed by another
/// attempt consumed for good: abandoning that consumer then revokes it. No
/// abandoned attempt ever consumes it.
pub async fn abandoned_attempts_are_bounded(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("abandoned_attempts_are_bounded", store).await?;
    let active = cx.issue_grant().await?;
    let taken = cx.issue_grant().await?;
    let consumer = cx.attempt()?;
    cx.consume(
        "consume of the second grant",
        &taken.id,
        &taken.binding(),
        cx.at(1),
        &consumer,
        OK,
    )
    .await?;
    let mut given_back = Vec::with_capacity(MAX_ABANDONED_ATTEMPTS + 1);
    for n in 0..MAX_ABANDONED_ATTEMPTS {
        let attempt = cx.attempt()?;
        cx.abandon(
            &format!("abandon {} of an active grant", n + 1),
            &active.id,
            &attempt,
            cx.at(10),
            USABLE,
        )
        .await?;
        cx.abandon(
            &format!("abandon {} of a grant another attempt consumed", n + 1),
            &taken.id,
            &attempt,
            cx.at(10),
            AbandonOutcome::ConsumedByOther,
        )
        .await?;
        given_back.push(attempt);
    }
    let one_more = cx.attempt()?;
    cx.abandon(
        "one abandon more than the bound on an active grant",
        &active.id,
        &one_more,
        cx.at(20),
        AbandonOutcome::Revoked,
    )
    .await?;
    cx.stored(
        "an active grant after one abandon too many",
        &active,
        GrantState::Revoked,
    )
    .await?;
    cx.abandon(
        "one abandon more than the bound on a consumed grant",
        &taken.id,
        &one_more,
        cx.at(20),
        AbandonOutcome::ConsumedByOther,
    )
    .await?;
    cx.abandon(
        "abandon of the consumer once the list is full",
        &taken.id,
        &consumer,
        cx.at(30),
        AbandonOutcome::Revoked,
    )
    .await?;
    cx.stored(
        "a consumed grant whose consumer was abandoned past the bound",
        &taken,
        GrantState::Revoked,
    )
    .await?;
    given_back.push(one_more);
    for (n, attempt) in given_back.iter().enumerate() {
        let answer = cx
            .store
            .consume_once(&active.id, &active.binding(), cx.at(40), attempt)
            .await
            .map_err(|e| cx.fail(format!("late consume {n}: store error: {e}")))?;
        if matches!(answer, ConsumeOutcome::Consumed { .. }) {
            return Err(cx.fail(format!(
                "late consume by abandoned attempt {n} answered {answer:?}, expected a refusal"
            )));
        }
    }
    Ok(())
}
