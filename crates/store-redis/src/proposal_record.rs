//! How a proposal is laid out in its record (proposal format 2: one string
//! value per proposal), and the strict reader of that layout (which also
//! reads the format 1 records of the previous version: the same fields
//! without `element`).
//!
//! A record is a format byte, the length of its head (4 bytes, big endian),
//! the head, then the screenshot as one field (absent without one). The
//! head is [`PROPOSAL_FIELDS`] in order, each encoded as a grant record's
//! fields are ([`record::put`]): its first [`FIXED_FIELDS`] never change
//! after propose (the record's fingerprint covers them), the last four are
//! the decision. The screenshot sits outside the head so that a list and
//! the read before a decision take the head alone and never copy megabytes
//! of screenshots; the scripts reply with heads tagged by their record's
//! format byte. `lua/proposal_prelude.lua` reads and rewrites the same
//! layout.

use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, ElementIdentity, MAX_PAGE_ID_BYTES, MAX_SCREENSHOT_BYTES,
    PageBinding, PageSnapshot, Proposal, ProposalId, ProposalState, RunId, StoreError,
    StoredProposal, Timestamp,
};

use crate::record::{self, ABSENT, Reader, parse_u64};
#[cfg(test)]
use crate::record::{LONG, SHORT_MAX};

/// The proposal record format written by this version of the store: the
/// first byte of every proposal record.
pub(crate) const PROPOSAL_FORMAT: u8 = 2;

/// The proposal record format of the previous version of the store: the
/// fields of [`PROPOSAL_FIELDS`] but `element`. Read as a proposal whose
/// page binds no element, which is what it was made with; scripts keep its
/// format byte when they write its decision.
pub(crate) const OLD_PROPOSAL_FORMAT: u8 = 1;

/// Where `element` sits in [`PROPOSAL_FIELDS`] (a format 1 head has no
/// such field: the fields after it sit one place earlier).
const ELEMENT_FIELD: usize = 12;

/// The bytes before the head: the format byte and the head's length.
const HEAD_AT: usize = 5;

/// The fields of a proposal record's head, in order.
pub(crate) const PROPOSAL_FIELDS: [&str; 19] = [
    "id",
    "actor",
    "run",
    "url",
    "action",
    "digest",
    "proposed_at",
    "expires_at",
    "session_id",
    "target_id",
    "page_revision",
    "target_found",
    "element",
    "rgen",
    "agen",
    "state",
    "approval_id",
    "decided_by",
    "decided_at",
];

/// Fields `1..=FIXED_FIELDS` never change after propose.
const FIXED_FIELDS: usize = 15;

/// State codes, as stored: one byte each.
pub(crate) mod state {
    pub(crate) const PENDING: &[u8] = b"p";
    pub(crate) const APPROVED: &[u8] = b"a";
    pub(crate) const DENIED: &[u8] = b"d";
}

/// What the library hands the propose script: the head's fields up to the
/// generations (the script appends the fences' generations it reads and
/// the decision fields of a pending proposal) and the screenshot field.
pub(crate) struct NewRecord {
    pub(crate) fixed: Vec<u8>,
    pub(crate) screenshot: Vec<u8>,
}

/// Whether a page id is one a proposal can hold: 1 to
/// [`MAX_PAGE_ID_BYTES`] printable ASCII characters without `/` (as
/// [`Proposal::observed`] checks).
fn page_id_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_PAGE_ID_BYTES
        && id.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

/// Whether a screenshot is one a proposal can hold: a PNG of at most
/// [`MAX_SCREENSHOT_BYTES`] (as [`Proposal::observed`] checks).
fn screenshot_ok(png: &[u8]) -> bool {
    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    png.len() <= MAX_SCREENSHOT_BYTES && png.starts_with(PNG_SIGNATURE)
}

fn put_opt(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => record::put(out, value),
        None => out.push(ABSENT),
    }
}

/// Encodes a new proposal, refusing ([`StoreError::Rejected`]) one the
/// store could not read back as it was given: an action digest that is not
/// the action's, a page or screenshot that [`Proposal::observed`] refuses.
pub(crate) fn encode_new(proposal: &Proposal) -> Result<NewRecord, StoreError> {
    let rejected = |message: &str| StoreError::Rejected {
        message: message.to_owned(),
    };
    if proposal.action_digest != proposal.action.digest() {
        return Err(rejected("action digest does not match the action"));
    }
    let mut fixed = Vec::with_capacity(256);
    for value in [
        proposal.id.as_str().as_bytes(),
        proposal.actor_id.as_str().as_bytes(),
        proposal.run_id.as_str().as_bytes(),
        proposal.url.as_bytes(),
        proposal.action.canonical_json().as_bytes(),
        proposal.action_digest.as_bytes(),
        proposal.proposed_at.as_millis().to_string().as_bytes(),
        proposal.expires_at.as_millis().to_string().as_bytes(),
    ] {
        record::put(&mut fixed, value);
    }
    let mut screenshot = Vec::new();
    match &proposal.snapshot {
        None => {
            fixed.extend_from_slice(&[ABSENT; 5]);
            screenshot.push(ABSENT);
        }
        Some(snapshot) => {
            let page = &snapshot.page;
            if ![&page.session_id, &page.target_id, &page.page_revision]
                .iter()
                .all(|id| page_id_ok(id))
            {
                return Err(rejected(
                    "page ids must be 1 to 256 printable ascii characters without `/`",
                ));
            }
            for value in [&page.session_id, &page.target_id, &page.page_revision] {
                record::put(&mut fixed, value.as_bytes());
            }
            record::put(&mut fixed, if snapshot.target_found { b"1" } else { b"0" });
            let element = page.element.as_ref().map(ElementIdentity::canonical_json);
            put_opt(&mut fixed, element.as_deref().map(str::as_bytes));
            if let Some(png) = &snapshot.screenshot_png
                && !screenshot_ok(png)
            {
                return Err(rejected("screenshot must be a png of at most 2 MiB"));
            }
            put_opt(&mut screenshot, snapshot.screenshot_png.as_deref());
        }
    }
    Ok(NewRecord { fixed, screenshot })
}

/// Reads a tagged head as the scripts reply with it (the record's format
/// byte, then the head) as the head of proposal `id` (`None`: whichever id
/// it names): see [`decode_head_of`].
pub(crate) fn decode_head(
    id: Option<&ProposalId>,
    key: &str,
    tagged: &[u8],
) -> Result<StoredProposal, StoreError> {
    let Some((&format, head)) = tagged.split_first() else {
        return Err(StoreError::corrupt(key, "proposal head is empty"));
    };
    decode_head_of(format, id, key, head)
}

/// Whether `format` is a proposal record format this store reads.
fn format_ok(format: u8) -> bool {
    format == PROPOSAL_FORMAT || format == OLD_PROPOSAL_FORMAT
}

/// Reads a proposal head of record format `format` (the bytes after the
/// head's length) as the head of proposal `id` (`None`: whichever id it
/// names), accepting only a complete, well-formed head: the proposal and
/// its decision, a snapshot without its screenshot (which is outside the
/// head). A format 1 head binds no element.
fn decode_head_of(
    format: u8,
    id: Option<&ProposalId>,
    key: &str,
    head: &[u8],
) -> Result<StoredProposal, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    if !format_ok(format) {
        return Err(corrupt(&format!(
            "unsupported proposal record format {format}"
        )));
    }
    let mut r = Reader::new(head);
    let mut values: Vec<Option<&[u8]>> = Vec::with_capacity(PROPOSAL_FIELDS.len());
    for (index, name) in PROPOSAL_FIELDS.into_iter().enumerate() {
        if index == ELEMENT_FIELD && format == OLD_PROPOSAL_FORMAT {
            values.push(None);
            continue;
        }
        values.push(
            r.field()
                .ok_or_else(|| corrupt(&format!("proposal record is cut short at {name}")))?,
        );
    }
    if !r.done() {
        return Err(corrupt("proposal head has bytes after its last field"));
    }
    let name = |index: usize| PROPOSAL_FIELDS.get(index).copied().unwrap_or("?");
    let optional = |index: usize| -> Result<Option<&str>, StoreError> {
        match values.get(index).copied().flatten() {
            Some(value) => std::str::from_utf8(value)
                .map(Some)
                .map_err(|_| corrupt(&format!("{} is not utf-8 text", name(index)))),
            None => Ok(None),
        }
    };
    let raw = |index: usize| -> Result<&[u8], StoreError> {
        values
            .get(index)
            .copied()
            .flatten()
            .ok_or_else(|| corrupt(&format!("proposal record lacks {}", name(index))))
    };
    let required = |index: usize| -> Result<&str, StoreError> {
        optional(index)?.ok_or_else(|| corrupt(&format!("proposal record lacks {}", name(index))))
    };
    let timestamp = |index: usize, text: &str| -> Result<Timestamp, StoreError> {
        parse_u64(text)
            .map(Timestamp::from_millis)
            .ok_or_else(|| corrupt(&format!("{} is not a timestamp", name(index))))
    };

    let stored_id = required(0)?;
    let proposal_id = match id {
        Some(id) if id.as_str() == stored_id => id.clone(),
        Some(_) => return Err(corrupt("id field does not match the key")),
        None => ProposalId::parse(stored_id).ok_or_else(|| corrupt("id is not a proposal id"))?,
    };
    let actor_id =
        ActorId::new(required(1)?).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(required(2)?).map_err(|_| corrupt("run is not a valid run id"))?;
    let url = required(3)?.to_owned();
    let action = Action::from_canonical_json(required(4)?)
        .map_err(|_| corrupt("action is not a canonical action"))?;
    let digest: [u8; 32] = raw(5)?
        .try_into()
        .map_err(|_| corrupt("digest is not 32 bytes"))?;
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let action_digest =
        ActionDigest::from_str(&hex).map_err(|_| corrupt("digest is not 32 bytes"))?;
    if action_digest != action.digest() {
        return Err(corrupt("digest does not match the action"));
    }
    let proposed_at = timestamp(6, required(6)?)?;
    let expires_at = timestamp(7, required(7)?)?;
    let element = optional(ELEMENT_FIELD)?
        .map(|json| {
            ElementIdentity::from_canonical_json(json)
                .map_err(|_| corrupt("element is not the canonical json of an element identity"))
        })
        .transpose()?;
    let snapshot = match (optional(8)?, optional(9)?, optional(10)?, optional(11)?) {
        (None, None, None, None) if element.is_none() => None,
        (None, None, None, None) => return Err(corrupt("element without a page")),
        (Some(session_id), Some(target_id), Some(page_revision), Some(found)) => {
            if ![session_id, target_id, page_revision]
                .iter()
                .all(|id| page_id_ok(id))
            {
                return Err(corrupt("page ids are not valid page ids"));
            }
            let target_found = match found {
                "1" => true,
                "0" => false,
                _ => return Err(corrupt("target_found is not 0 or 1")),
            };
            Some(PageSnapshot {
                page: PageBinding {
                    session_id: session_id.to_owned(),
                    target_id: target_id.to_owned(),
                    page_revision: page_revision.to_owned(),
                    element,
                },
                screenshot_png: None,
                target_found,
            })
        }
        _ => return Err(corrupt("page fields must be set together")),
    };
    for index in [13, 14] {
        parse_u64(required(index)?)
            .ok_or_else(|| corrupt("generation is not a decimal integer"))?;
    }
    // The decision: the fields after the fixed ones.
    let approval_id = optional(FIXED_FIELDS + 1)?;
    let decided_by = optional(FIXED_FIELDS + 2)?
        .map(|by| ApproverId::new(by).map_err(|_| corrupt("decided_by is not an approver id")))
        .transpose()?;
    let decided_at = optional(FIXED_FIELDS + 3)?
        .map(|at| timestamp(FIXED_FIELDS + 3, at))
        .transpose()?;
    let state = match (raw(FIXED_FIELDS)?, approval_id, decided_at) {
        (state::PENDING, None, None) if decided_by.is_none() => ProposalState::Pending,
        (state::APPROVED, Some(approval_id), Some(at)) => ProposalState::Approved {
            approval_id: ApprovalId::parse(approval_id)
                .ok_or_else(|| corrupt("approval_id is not an approval id"))?,
            by: decided_by,
            at,
        },
        (state::DENIED, None, Some(at)) => ProposalState::Denied { by: decided_by, at },
        (state::PENDING, _, _) => return Err(corrupt("pending proposal has decision fields")),
        (state::APPROVED | state::DENIED, _, _) => {
            return Err(corrupt("decision fields do not match the state"));
        }
        _ => return Err(corrupt("unknown proposal state")),
    };
    Ok(StoredProposal {
        proposal: Proposal {
            id: proposal_id,
            actor_id,
            run_id,
            url,
            action,
            action_digest,
            proposed_at,
            expires_at,
            snapshot,
        },
        state,
    })
}

/// Reads a whole proposal record (the key's string value) as proposal
/// `id`: format, head and screenshot, nothing after.
pub(crate) fn decode(
    id: &ProposalId,
    key: &str,
    record: &[u8],
) -> Result<StoredProposal, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    let Some((&version, _)) = record.split_first() else {
        return Err(corrupt("proposal record is empty"));
    };
    if !format_ok(version) {
        return Err(corrupt(&format!(
            "unsupported proposal record format {version}"
        )));
    }
    let length: [u8; 4] = record
        .get(1..HEAD_AT)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("proposal record is cut short"))?;
    let head_end = usize::try_from(u32::from_be_bytes(length))
        .ok()
        .and_then(|n| n.checked_add(HEAD_AT))
        .ok_or_else(|| corrupt("proposal record is cut short"))?;
    let head = record
        .get(HEAD_AT..head_end)
        .ok_or_else(|| corrupt("proposal record is cut short"))?;
    let mut stored = decode_head_of(version, Some(id), key, head)?;
    let mut tail = Reader::new(record.get(head_end..).unwrap_or_default());
    let screenshot = tail
        .field()
        .filter(|_| tail.done())
        .ok_or_else(|| corrupt("proposal record does not end with one screenshot field"))?;
    if let Some(png) = screenshot {
        let Some(snapshot) = stored.proposal.snapshot.as_mut() else {
            return Err(corrupt("screenshot without a page"));
        };
        if !screenshot_ok(png) {
            return Err(corrupt("screenshot is not a png of at most 2 MiB"));
        }
        snapshot.screenshot_png = Some(png.to_vec());
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use countersign_approval_core::policy::{Policy, StaticResolver};

    fn policy() -> Policy {
        Policy::builder()
            .allow_host("docs.example.com")
            .resolver(StaticResolver::answering_all(["93.184.216.34"
                .parse()
                .unwrap()]))
            .build()
            .unwrap()
    }

    fn proposal(observed: bool, screenshot: Option<Vec<u8>>) -> Proposal {
        let policy = policy();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let url = rt
            .block_on(
                policy.authorize_destination(&format!(
                    "https://docs.example.com/{}",
                    "p".repeat(400)
                )),
            )
            .unwrap();
        let action = policy
            .authorize_action(&serde_json::json!({
                "method": "fill",
                "selector": "input[name=\"q\"] «ü»",
                "description": "type the \"query\"\n",
                "arguments": {"value": "x".repeat(300), "a": "1"},
            }))
            .unwrap();
        let p = Proposal::for_action(
            ActorId::new("actor {x}").unwrap(),
            RunId::new("run-1").unwrap(),
            &url,
            &action,
            std::time::Duration::from_secs(60),
            Timestamp::from_millis(1_700_000_000_000),
        )
        .unwrap();
        if !observed {
            return p;
        }
        p.observed(PageSnapshot {
            page: PageBinding {
                session_id: "session-1".to_owned(),
                target_id: "target-1".to_owned(),
                page_revision: "rev-1".to_owned(),
                element: Some(crate::record::tests::element()),
            },
            screenshot_png: screenshot,
            target_found: true,
        })
        .unwrap()
    }

    /// The record the propose script makes of `encode_new`'s bytes, with
    /// these decision fields.
    fn stored(p: &Proposal, decision: [Option<&[u8]>; 4]) -> Vec<u8> {
        let new = encode_new(p).unwrap();
        let mut head = new.fixed.clone();
        record::put(&mut head, b"0");
        record::put(&mut head, b"3");
        for value in decision {
            put_opt(&mut head, value);
        }
        let mut out = vec![PROPOSAL_FORMAT];
        out.extend_from_slice(&u32::try_from(head.len()).unwrap().to_be_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&new.screenshot);
        out
    }

    const PENDING: [Option<&[u8]>; 4] = [Some(b"p"), None, None, None];

    /// The head fields of record `raw` (of format 2), by position.
    fn head_fields(raw: &[u8]) -> Vec<Option<Vec<u8>>> {
        let len = usize::try_from(u32::from_be_bytes(raw[1..HEAD_AT].try_into().unwrap())).unwrap();
        let mut r = Reader::new(&raw[HEAD_AT..HEAD_AT + len]);
        let fields = PROPOSAL_FIELDS
            .iter()
            .map(|_| r.field().unwrap().map(<[u8]>::to_vec))
            .collect();
        assert!(r.done());
        fields
    }

    /// A record of `format` with these head fields and the screenshot of
    /// `raw`.
    fn with_head(format: u8, fields: &[Option<Vec<u8>>], raw: &[u8]) -> Vec<u8> {
        let len = usize::try_from(u32::from_be_bytes(raw[1..HEAD_AT].try_into().unwrap())).unwrap();
        let mut head = Vec::new();
        for value in fields {
            put_opt(&mut head, value.as_deref());
        }
        let mut out = vec![format];
        out.extend_from_slice(&u32::try_from(head.len()).unwrap().to_be_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&raw[HEAD_AT + len..]);
        out
    }

    #[test]
    fn the_element_is_kept_and_read_strictly() {
        let p = proposal(true, Some(png(100)));
        let raw = stored(&p, PENDING);
        let mut fields = head_fields(&raw);
        let json = crate::record::tests::element().canonical_json();
        assert_eq!(fields[ELEMENT_FIELD].as_deref(), Some(json.as_bytes()));
        let read = decode(&p.id, "k", &raw).unwrap();
        assert_eq!(read, StoredProposal::pending(p.clone()));
        // The tagged head a script replies with reads the same, without
        // the screenshot.
        let mut tagged = vec![PROPOSAL_FORMAT];
        tagged.extend_from_slice(&raw[HEAD_AT..raw.len() - 101]);
        let head = decode_head(Some(&p.id), "k", &tagged).unwrap();
        assert_eq!(
            head.proposal.snapshot.map(|s| s.page),
            p.snapshot.as_ref().map(|s| s.page.clone())
        );
        let canonical = fields[ELEMENT_FIELD].take();
        for bad in [&b""[..], b"{}", b"null", b"\xff", b" {}"] {
            fields[ELEMENT_FIELD] = Some(bad.to_vec());
            let err = decode(&p.id, "k", &with_head(PROPOSAL_FORMAT, &fields, &raw)).err();
            assert!(
                matches!(&err, Some(StoreError::Corrupt { message, .. }) if message.contains("element")),
                "{bad:?}: {err:?}"
            );
        }
        // An element without a page.
        let bare = proposal(false, None);
        let bare_raw = stored(&bare, PENDING);
        let mut bare_fields = head_fields(&bare_raw);
        bare_fields[ELEMENT_FIELD] = canonical;
        assert!(matches!(
            decode(&bare.id, "k", &with_head(PROPOSAL_FORMAT, &bare_fields, &bare_raw)),
            Err(StoreError::Corrupt { message, .. }) if message == "element without a page"
        ));
    }

    proptest::proptest! {
        /// Any element identity a proposal's page binds reads back as it
        /// was, from the whole record and from the tagged head.
        #[test]
        fn any_element_round_trips_through_the_record(
            element in crate::record::tests::any_element()
        ) {
            let mut p = proposal(true, Some(png(100)));
            if let Some(s) = p.snapshot.as_mut() {
                s.page.element = Some(element);
            }
            let raw = stored(&p, PENDING);
            proptest::prop_assert_eq!(decode(&p.id, "k", &raw).unwrap(), StoredProposal::pending(p.clone()));
            let mut tagged = vec![PROPOSAL_FORMAT];
            tagged.extend_from_slice(&raw[HEAD_AT..raw.len() - 101]);
            let head = decode_head(Some(&p.id), "k", &tagged).unwrap();
            proptest::prop_assert_eq!(
                head.proposal.snapshot.map(|s| s.page),
                p.snapshot.map(|s| s.page)
            );
        }
    }

    #[test]
    fn a_format_1_record_reads_as_a_proposal_with_no_element() {
        for observed in [false, true] {
            let mut p = proposal(observed, Some(png(100)).filter(|_| observed));
            if let Some(s) = p.snapshot.as_mut() {
                s.page.element = None;
            }
            let raw = stored(&p, PENDING);
            let mut fields = head_fields(&raw);
            assert_eq!(fields.remove(ELEMENT_FIELD), None);
            let old = with_head(OLD_PROPOSAL_FORMAT, &fields, &raw);
            assert_eq!(
                decode(&p.id, "k", &old).unwrap(),
                StoredProposal::pending(p.clone())
            );
            // Read as format 2, the same bytes are cut short; other formats
            // are refused.
            for format in [0u8, PROPOSAL_FORMAT, 3, 0xFF] {
                let mut relabelled = old.clone();
                relabelled[0] = format;
                assert!(matches!(
                    decode(&p.id, "k", &relabelled),
                    Err(StoreError::Corrupt { .. })
                ));
            }
        }
    }

    fn png(len: usize) -> Vec<u8> {
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.resize(len, 7);
        png
    }

    #[test]
    fn a_record_reads_back_as_the_proposal_it_was_written_from() {
        for p in [
            proposal(false, None),
            proposal(true, None),
            proposal(true, Some(png(70_000))),
            proposal(true, Some(png(MAX_SCREENSHOT_BYTES))),
        ] {
            let raw = stored(&p, PENDING);
            let read = decode(&p.id, "k", &raw).unwrap();
            assert_eq!(read, StoredProposal::pending(p.clone()));
            let approved = stored(
                &p,
                [Some(b"a"), Some(b"apr_1"), Some(b"carol"), Some(b"17")],
            );
            assert_eq!(
                decode(&p.id, "k", &approved).unwrap().state,
                ProposalState::Approved {
                    approval_id: ApprovalId::parse("apr_1").unwrap(),
                    by: Some(ApproverId::new("carol").unwrap()),
                    at: Timestamp::from_millis(17),
                }
            );
            let denied = stored(&p, [Some(b"d"), None, None, Some(b"18")]);
            assert_eq!(
                decode(&p.id, "k", &denied).unwrap().state,
                ProposalState::Denied {
                    by: None,
                    at: Timestamp::from_millis(18),
                }
            );
            // Every byte cut off the end is a record cut short; one more is
            // a record with bytes after its last field.
            // (A few cuts of the long ones: each decode copies.)
            let cuts: Vec<usize> = if raw.len() < 10_000 {
                (0..raw.len()).collect()
            } else {
                vec![0, 1, HEAD_AT, raw.len() / 2, raw.len() - 1]
            };
            for len in cuts {
                assert!(decode(&p.id, "k", &raw[..len]).is_err(), "{len}");
            }
            let mut longer = raw.clone();
            longer.push(0);
            assert!(decode(&p.id, "k", &longer).is_err());
            let other = ProposalId::parse("prp_other").unwrap();
            assert!(decode(&other, "k", &raw).is_err());
        }
    }

    #[test]
    fn bad_decisions_are_corrupt() {
        let p = proposal(true, None);
        for decision in [
            [Some(&b"x"[..]), None, None, None],
            [Some(b"p"), None, None, Some(b"1")],
            [Some(b"p"), None, Some(b"carol"), None],
            [Some(b"a"), None, None, Some(b"1")],
            [Some(b"a"), Some(b"apr_1"), None, None],
            [Some(b"a"), Some(b"a.b"), None, Some(b"1")],
            [Some(b"d"), Some(b"apr_1"), None, Some(b"1")],
            [Some(b"d"), None, None, Some(b"01")],
            [None, None, None, None],
        ] {
            assert!(
                matches!(
                    decode(&p.id, "k", &stored(&p, decision)),
                    Err(StoreError::Corrupt { .. })
                ),
                "{decision:?}"
            );
        }
    }

    #[test]
    fn what_the_store_cannot_read_back_is_rejected() {
        let mut p = proposal(true, None);
        p.action_digest = policy()
            .authorize_action(&serde_json::json!({"method": "click", "selector": "a"}))
            .unwrap()
            .digest();
        assert!(matches!(encode_new(&p), Err(StoreError::Rejected { .. })));
        let mut p = proposal(true, None);
        if let Some(s) = p.snapshot.as_mut() {
            s.page.target_id = "a/b".to_owned();
        }
        assert!(matches!(encode_new(&p), Err(StoreError::Rejected { .. })));
        for bad in [b"not a png".to_vec(), png(MAX_SCREENSHOT_BYTES + 1)] {
            let mut p = proposal(true, None);
            if let Some(s) = p.snapshot.as_mut() {
                s.screenshot_png = Some(bad);
            }
            assert!(matches!(encode_new(&p), Err(StoreError::Rejected { .. })));
        }
    }

    #[test]
    fn the_reader_takes_exactly_what_the_grant_encoder_writes() {
        for len in [0usize, 1, 0xFC, 0xFD, 0xFE, 0xFF, 300, 70_000] {
            let value = vec![b'x'; len];
            let mut out = Vec::new();
            record::put(&mut out, &value);
            let mut r = Reader::new(&out);
            assert_eq!(r.field(), Some(Some(&value[..])), "{len}");
            assert!(r.done());
        }
        assert_eq!(Reader::new(&[ABSENT]).field(), Some(None));
        assert_eq!(
            Reader::new(&[LONG, 0, 0, 0, 3, b'a', b'b', b'c']).field(),
            None
        );
    }

    #[test]
    fn the_lua_layout_matches_the_rust_one() {
        let prelude = include_str!("lua/prelude.lua");
        assert!(prelude.contains(&format!("local SHORT_MAX = {SHORT_MAX}\n")));
        assert!(prelude.contains(&format!("local ABSENT = {ABSENT}\n")));
        assert!(prelude.contains(&format!("local LONG = {LONG}\n")));
        let proposals = include_str!("lua/proposal_prelude.lua");
        assert!(proposals.contains(&format!("local P_FORMAT = {PROPOSAL_FORMAT}\n")));
        assert!(proposals.contains(&format!("local P_OLD_FORMAT = {OLD_PROPOSAL_FORMAT}\n")));
        assert_eq!(PROPOSAL_FIELDS[FIXED_FIELDS - 1], "agen");
        assert!(proposals.contains("local P_LAST_FIXED = 'agen'\n"));
        assert_eq!(PROPOSAL_FIELDS[ELEMENT_FIELD], "element");
        assert!(proposals.contains(&format!("local HEAD_AT = {}\n", HEAD_AT + 1)));
        assert!(proposals.contains(&format!("local MAX_SCREENSHOT = {MAX_SCREENSHOT_BYTES}\n")));
        assert_eq!(
            crate::record::tests::lua_names(proposals, "P_FIELDS"),
            PROPOSAL_FIELDS
        );
        let codes = [state::PENDING, state::APPROVED, state::DENIED]
            .map(|code| format!("'{}'", String::from_utf8_lossy(code)))
            .join(", ");
        assert!(proposals.contains(&format!("local PENDING, APPROVED, DENIED = {codes}\n")));
    }
}
