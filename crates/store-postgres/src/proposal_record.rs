//! How a proposal is laid out in its row (format 1, with the `element`
//! column of schema version 4), its seal, and the strict reader of that
//! layout.

use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, ElementIdentity, MAX_SCREENSHOT_BYTES, PageBinding,
    PageSnapshot, Proposal, ProposalId, ProposalState, RunId, StoreError, StoredProposal,
    Timestamp,
};
use sha2::{Digest, Sha256};
use tokio_postgres::Row;

use crate::record::{Head, StrictRow, fence_moved, hex, millis, seal_with_element};

/// The proposal row format written by this version of the store.
pub(crate) const FORMAT: i16 = 1;

/// Decision states, as stored.
pub(crate) mod state {
    pub(crate) const PENDING: &str = "pending";
    pub(crate) const APPROVED: &str = "approved";
    pub(crate) const DENIED: &str = "denied";
}

/// Every column of a proposal row, in the order [`decode`] reads them,
/// before the current generations of its run's and actor's fences.
const COLUMNS: [&str; 22] = [
    "id",
    "format",
    "seal",
    "actor_id",
    "run_id",
    "url",
    "action",
    "action_digest",
    "proposed_at",
    "expires_at",
    "page_session_id",
    "page_target_id",
    "page_revision",
    "screenshot_png",
    "target_found",
    "run_gen",
    "actor_gen",
    "state",
    "approval_id",
    "decided_by",
    "decided_at",
    "element",
];

/// The proposal columns [`decode`] reads, from the proposals table as
/// `alias`; the caller appends the run's and the actor's fence generation.
pub(crate) fn columns(alias: &str) -> String {
    let columns: Vec<String> = COLUMNS.iter().map(|c| format!("{alias}.{c}")).collect();
    columns.join(", ")
}

/// How many values the seal covers.
pub(crate) const SEALED: usize = 16;

/// The sealed columns, in seal order, as SQL text expressions over a
/// proposal row. The screenshot is sealed by its sha-256, so the seal costs
/// the same whatever the image's size.
pub(crate) const SEALED_SQL: [&str; SEALED] = [
    "format::text",
    "id",
    "actor_id",
    "run_id",
    "url",
    "action",
    "action_digest",
    "proposed_at::text",
    "expires_at::text",
    "page_session_id",
    "page_target_id",
    "page_revision",
    "encode(sha256(screenshot_png), 'hex')",
    "target_found::text",
    "run_gen::text",
    "actor_gen::text",
];

/// The SQL expressions of the seal of a proposal being inserted: its
/// values from the CTE `v`, the generations of the fences `r` and `a` it
/// records, and this version's format.
pub(crate) fn insert_seal_values() -> Vec<String> {
    SEALED_SQL
        .iter()
        .map(|column| match *column {
            "format::text" => format!("'{FORMAT}'::text"),
            "run_gen::text" => "r.gen::text".to_owned(),
            "actor_gen::text" => "a.gen::text".to_owned(),
            "encode(sha256(screenshot_png), 'hex')" => {
                "encode(sha256(v.screenshot_png), 'hex')".to_owned()
            }
            other => format!("v.{other}"),
        })
        .collect()
}

/// A proposal's values as the store writes them at propose (the seal is
/// computed by the propose statement, which reads the fence generations it
/// covers).
pub(crate) struct NewProposal {
    pub(crate) action: String,
    pub(crate) action_digest: String,
    pub(crate) proposed_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) page_session_id: Option<String>,
    pub(crate) page_target_id: Option<String>,
    pub(crate) page_revision: Option<String>,
    pub(crate) screenshot_png: Option<Vec<u8>>,
    pub(crate) target_found: Option<bool>,
    pub(crate) element: Option<String>,
}

/// The values of a new proposal, or [`StoreError::Rejected`] for one this
/// store could not read back as it was given: a timestamp past `bigint`, a
/// digest that is not the action's, a screenshot over
/// [`MAX_SCREENSHOT_BYTES`].
pub(crate) fn encode_new(proposal: &Proposal) -> Result<NewProposal, StoreError> {
    let rejected = |message: &str| StoreError::Rejected {
        message: message.to_owned(),
    };
    let time = |at: Timestamp| {
        millis(at).ok_or_else(|| rejected("a timestamp is past what postgres bigint holds"))
    };
    if proposal.action_digest != proposal.action.digest() {
        // Stored, it would read back as corrupt for good.
        return Err(rejected("the proposal's action digest is not its action's"));
    }
    let snapshot = proposal.snapshot.as_ref();
    if snapshot
        .and_then(|s| s.screenshot_png.as_ref())
        .is_some_and(|png| png.len() > MAX_SCREENSHOT_BYTES)
    {
        return Err(rejected("the screenshot is larger than 2 MiB"));
    }
    Ok(NewProposal {
        action: proposal.action.canonical_json(),
        action_digest: proposal.action_digest.to_hex(),
        proposed_at: time(proposal.proposed_at)?,
        expires_at: time(proposal.expires_at)?,
        page_session_id: snapshot.map(|s| s.page.session_id.clone()),
        page_target_id: snapshot.map(|s| s.page.target_id.clone()),
        page_revision: snapshot.map(|s| s.page.page_revision.clone()),
        screenshot_png: snapshot.and_then(|s| s.screenshot_png.clone()),
        target_found: snapshot.map(|s| s.target_found),
        element: snapshot
            .and_then(|s| s.page.element.as_ref())
            .map(ElementIdentity::canonical_json),
    })
}

/// A decision state as its columns: state name, approval id, decided by,
/// decided at (`None` when the time does not fit a `bigint`).
pub(crate) fn state_columns(
    decided: &ProposalState,
) -> (
    &'static str,
    Option<&str>,
    Option<&str>,
    Option<Option<i64>>,
) {
    match decided {
        ProposalState::Pending => (state::PENDING, None, None, Some(None)),
        ProposalState::Approved {
            approval_id,
            by,
            at,
        } => (
            state::APPROVED,
            Some(approval_id.as_str()),
            by.as_ref().map(ApproverId::as_str),
            millis(*at).map(Some),
        ),
        ProposalState::Denied { by, at } => (
            state::DENIED,
            None,
            by.as_ref().map(ApproverId::as_str),
            millis(*at).map(Some),
        ),
    }
}

/// A proposal as read, and whether its run or actor was stopped since it
/// was proposed.
pub(crate) struct ReadProposal {
    pub(crate) stored: StoredProposal,
    pub(crate) stopped: bool,
}

/// Reads a row selected with [`columns`] and then the run's and the actor's
/// current fence generations, accepting only a complete, well-formed,
/// correctly sealed format 1 row (the proposal `expected`, when given; its
/// element, when set, the canonical JSON of a valid identity on a page, a
/// row written before schema version 4 having none)
/// whose run and actor fences exist at or past the generations it recorded.
pub(crate) fn decode(expected: Option<&ProposalId>, row: &Row) -> Result<ReadProposal, StoreError> {
    let strict = StrictRow::new(row, &COLUMNS, "proposal", expected.map(ProposalId::as_str))?;
    let corrupt = |message: &str| strict.corrupt(message);
    let Head {
        id: stored_id,
        format,
        seal: stored_seal,
        actor,
        run,
    } = strict.head()?;
    let url: String = strict.get(5)?;
    let action_text: String = strict.get(6)?;
    let digest_text: String = strict.get(7)?;
    let proposed_at: i64 = strict.get(8)?;
    let expires_at: i64 = strict.get(9)?;
    let session_id: Option<String> = strict.get(10)?;
    let target_id: Option<String> = strict.get(11)?;
    let page_revision: Option<String> = strict.get(12)?;
    let screenshot: Option<Vec<u8>> = strict.get(13)?;
    let target_found: Option<bool> = strict.get(14)?;
    let run_gen: i64 = strict.get(15)?;
    let actor_gen: i64 = strict.get(16)?;
    let state_text: String = strict.get(17)?;
    let approval_id: Option<String> = strict.get(18)?;
    let decided_by: Option<String> = strict.get(19)?;
    let decided_at: Option<i64> = strict.get(20)?;
    let element_text: Option<String> = strict.get(21)?;
    let run_fence_gen: Option<i64> = strict.get(22)?;
    let actor_fence_gen: Option<i64> = strict.get(23)?;

    if format != FORMAT {
        return Err(corrupt("unsupported proposal row format"));
    }
    if expected.is_some_and(|id| id.as_str() != stored_id) {
        return Err(corrupt("id column does not match the requested id"));
    }
    let (format_text, proposed_text, expires_text, run_gen_text, actor_gen_text) = (
        format.to_string(),
        proposed_at.to_string(),
        expires_at.to_string(),
        run_gen.to_string(),
        actor_gen.to_string(),
    );
    let screenshot_hash = screenshot.as_deref().map(|png| hex(&Sha256::digest(png)));
    let found_text = target_found.map(|found| found.to_string());
    let expected_seal = seal_with_element(
        &[
            Some(&format_text),
            Some(&stored_id),
            Some(&actor),
            Some(&run),
            Some(&url),
            Some(&action_text),
            Some(&digest_text),
            Some(&proposed_text),
            Some(&expires_text),
            session_id.as_deref(),
            target_id.as_deref(),
            page_revision.as_deref(),
            screenshot_hash.as_deref(),
            found_text.as_deref(),
            Some(&run_gen_text),
            Some(&actor_gen_text),
        ],
        element_text.as_deref(),
    );
    if stored_seal != expected_seal {
        return Err(corrupt(
            "seal does not match the row: a column written at propose was changed",
        ));
    }
    let id = ProposalId::parse(&stored_id).ok_or_else(|| corrupt("id is not a proposal id"))?;
    let actor_id = ActorId::new(actor).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(run).map_err(|_| corrupt("run is not a valid run id"))?;
    let action = Action::from_canonical_json(&action_text)
        .map_err(|_| corrupt("action is not canonical action json"))?;
    let action_digest = ActionDigest::from_str(&digest_text)
        .map_err(|_| corrupt("digest is not 64 lower-case hex characters"))?;
    if action_digest != action.digest() {
        return Err(corrupt("digest does not match the action"));
    }
    let timestamp = |value: i64, name: &str| {
        u64::try_from(value)
            .map(Timestamp::from_millis)
            .map_err(|_| corrupt(&format!("{name} is negative")))
    };
    let element = element_text
        .map(|json| {
            ElementIdentity::from_canonical_json(&json)
                .map_err(|_| corrupt("element is not the canonical json of an element identity"))
        })
        .transpose()?;
    let proposed_at = timestamp(proposed_at, "proposed_at")?;
    let expires_at = timestamp(expires_at, "expires_at")?;
    let snapshot = match (session_id, target_id, page_revision, target_found) {
        (None, None, None, None) if screenshot.is_none() && element.is_none() => None,
        (Some(session_id), Some(target_id), Some(page_revision), Some(target_found)) => {
            Some(PageSnapshot {
                page: PageBinding {
                    session_id,
                    target_id,
                    page_revision,
                    element,
                },
                screenshot_png: screenshot,
                target_found,
            })
        }
        _ => {
            return Err(corrupt(
                "the snapshot columns are neither all set nor all null",
            ));
        }
    };
    let approver = |by: Option<String>| {
        by.map(|by| ApproverId::new(by).map_err(|_| corrupt("decided_by is not an approver id")))
            .transpose()
    };
    let decided = match (state_text.as_str(), approval_id, decided_at) {
        (state::PENDING, None, None) if decided_by.is_none() => ProposalState::Pending,
        (state::APPROVED, Some(approval_id), Some(at)) => ProposalState::Approved {
            approval_id: ApprovalId::parse(&approval_id)
                .ok_or_else(|| corrupt("approval_id is not an approval id"))?,
            by: approver(decided_by)?,
            at: timestamp(at, "decided_at")?,
        },
        (state::DENIED, None, Some(at)) => ProposalState::Denied {
            by: approver(decided_by)?,
            at: timestamp(at, "decided_at")?,
        },
        (state::PENDING | state::APPROVED | state::DENIED, _, _) => {
            return Err(corrupt(
                "the decision columns do not match the proposal's state",
            ));
        }
        _ => return Err(corrupt("unknown proposal state")),
    };

    // Stopped: the run's or the actor's fence moved past the generation the
    // proposal recorded.
    let run_stopped = fence_moved(run_fence_gen, run_gen, "proposal", "run", &corrupt)?;
    let actor_stopped = fence_moved(actor_fence_gen, actor_gen, "proposal", "actor", &corrupt)?;

    Ok(ReadProposal {
        stored: StoredProposal {
            proposal: Proposal {
                id,
                actor_id,
                run_id,
                url,
                action,
                action_digest,
                proposed_at,
                expires_at,
                snapshot,
            },
            state: decided,
        },
        stopped: run_stopped || actor_stopped,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::record::seal_sql_over;

    #[test]
    fn every_column_written_at_propose_is_sealed_in_order() {
        let sql = seal_sql_over(&SEALED_SQL);
        let mut at = 0;
        for column in SEALED_SQL {
            let found = sql[at..].find(&format!("octet_length({column})")).unwrap();
            at += found + 1;
        }
        assert_eq!(sql.matches("octet_length(").count(), SEALED);
        let unsealed: Vec<&str> = COLUMNS
            .iter()
            .copied()
            .filter(|c| {
                !SEALED_SQL.iter().any(|s| {
                    s.split("::").next() == Some(*c) || *s == format!("encode(sha256({c}), 'hex')")
                })
            })
            .collect();
        // The element is sealed after them, when set (see
        // `seal_with_element`).
        assert_eq!(
            unsealed,
            [
                "seal",
                "state",
                "approval_id",
                "decided_by",
                "decided_at",
                "element"
            ]
        );
    }

    #[test]
    fn the_insert_seal_differs_only_in_where_the_values_come_from() {
        let insert = insert_seal_values();
        assert_eq!(insert.len(), SEALED);
        assert_eq!(insert[0], "'1'::text");
        assert_eq!(insert[12], "encode(sha256(v.screenshot_png), 'hex')");
        assert_eq!(insert[13], "v.target_found::text");
        assert_eq!(insert[14], "r.gen::text");
        assert_eq!(insert[15], "a.gen::text");
    }
}
