//! Actors, runs, URLs and actions the checks build grants from, and a small
//! harness that turns every store answer into an expectation.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use countersign_approval_core::MAX_ATTRIBUTE_VALUE_BYTES;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding, Clock,
    ConsumeOutcome, ELEMENT_ATTRIBUTES, ElementIdentity, FrameIdentity, GrantState, IssueError,
    MAX_ACCESSIBLE_NAME_BYTES, MAX_ELEMENT_TEXT_BYTES, MAX_FRAME_FIELD_BYTES, MAX_FRAMES,
    MAX_ROLE_BYTES, MAX_TAG_BYTES, RevokeOutcome, RunId, StoredGrant, SystemClock, Timestamp,
};
use countersign_canonical_policy::{Action, AuthorizedUrl, Policy, StaticResolver};

use crate::failure::CheckFailure;

/// One of the four fields of a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingField {
    /// The actor id.
    Actor,
    /// The run id.
    Run,
    /// The canonical URL.
    Url,
    /// The action digest.
    Action,
}

impl BindingField {
    /// Every field.
    pub const ALL: [BindingField; 4] = [
        BindingField::Actor,
        BindingField::Run,
        BindingField::Url,
        BindingField::Action,
    ];

    /// A lower-case word: `actor`, `run`, `url` or `action`.
    pub fn as_str(self) -> &'static str {
        match self {
            BindingField::Actor => "actor",
            BindingField::Run => "run",
            BindingField::Url => "url",
            BindingField::Action => "action",
        }
    }
}

/// The lifetime of the grants scenario checks issue.
pub(crate) const TTL: Duration = Duration::from_secs(60);
/// [`TTL`] in milliseconds.
pub(crate) const TTL_MS: u64 = 60_000;

/// Two of each binding field, so any field can be switched to "the other one".
pub(crate) struct Fixtures {
    pub(crate) actors: [ActorId; 2],
    pub(crate) runs: [RunId; 2],
    pub(crate) urls: [AuthorizedUrl; 2],
    pub(crate) actions: [Action; 2],
}

fn setup(check: &'static str, what: &str, error: impl std::fmt::Display) -> CheckFailure {
    CheckFailure::new(
        check,
        format!("could not build the {what} fixture: {error}"),
    )
}

/// An actor and two runs named after `check` with a random suffix, so
/// that checks sharing one store never meet.
pub(crate) fn unique_actor_and_runs(
    check: &'static str,
) -> Result<(ActorId, [RunId; 2]), CheckFailure> {
    let fail = |e: &dyn std::fmt::Display| CheckFailure::new(check, format!("setup: {e}"));
    let unique = countersign_approval_core::ApprovalId::generate().map_err(|e| fail(&e))?;
    let name = |what: &str| format!("{check}-{what}-{unique}");
    Ok((
        ActorId::new(name("actor")).map_err(|e| fail(&e))?,
        [
            RunId::new(name("run-a")).map_err(|e| fail(&e))?,
            RunId::new(name("run-b")).map_err(|e| fail(&e))?,
        ],
    ))
}

impl Fixtures {
    pub(crate) async fn new(check: &'static str) -> Result<Fixtures, CheckFailure> {
        let policy = Policy::builder()
            .allow_host("shop.example.com")
            .resolver(StaticResolver::answering_all([std::net::IpAddr::from([
                93, 184, 216, 34,
            ])]))
            .build()
            .map_err(|e| setup(check, "policy", e))?;
        let url = |text: &'static str| {
            let policy = policy.clone();
            async move {
                policy
                    .authorize_destination(text)
                    .await
                    .map_err(|e| setup(check, "url", e))
            }
        };
        let action = |value: serde_json::Value| {
            policy
                .authorize_action(&value)
                .map_err(|e| setup(check, "action", e))
        };
        let actor = |text: &str| ActorId::new(text).map_err(|e| setup(check, "actor", e));
        let run = |text: &str| RunId::new(text).map_err(|e| setup(check, "run", e));
        Ok(Fixtures {
            actors: [actor("actor-alice")?, actor("actor-bob")?],
            runs: [run("run-1")?, run("run-2")?],
            urls: [
                url("https://shop.example.com/cart?item=1").await?,
                url("https://shop.example.com/checkout").await?,
            ],
            actions: [
                action(serde_json::json!({"method": "click", "selector": "button#buy"}))?,
                action(serde_json::json!({
                    "method": "fill",
                    "selector": "input#amount",
                    "arguments": {"value": "100"}
                }))?,
            ],
        })
    }

    /// `binding` with `field` switched to the other fixture value.
    pub(crate) fn mismatched(&self, binding: &Binding, field: BindingField) -> Binding {
        fn other<T: PartialEq + Clone>(pair: &[T; 2], current: &T) -> T {
            if *current == pair[0] {
                pair[1].clone()
            } else {
                pair[0].clone()
            }
        }
        let mut changed = binding.clone();
        match field {
            BindingField::Actor => changed.actor_id = other(&self.actors, &binding.actor_id),
            BindingField::Run => changed.run_id = other(&self.runs, &binding.run_id),
            BindingField::Url => {
                changed.url = if binding.url == self.urls[0].as_str() {
                    self.urls[1].as_str().to_owned()
                } else {
                    self.urls[0].as_str().to_owned()
                }
            }
            BindingField::Action => {
                changed.action_digest = if binding.action_digest == self.actions[0].digest() {
                    self.actions[1].digest()
                } else {
                    self.actions[0].digest()
                }
            }
        }
        changed
    }
}

/// One scenario's view of the store: every call is checked against what the
/// contract says it must answer, and a wrong answer becomes a
/// [`CheckFailure`] naming the step.
pub(crate) struct Ctx<'a> {
    pub(crate) check: &'static str,
    pub(crate) store: &'a dyn ApprovalStore,
    pub(crate) fx: Fixtures,
    /// The scenario's "now": the wall clock when it started, so stores that
    /// keep records for a while past expiry keep them.
    pub(crate) t0: Timestamp,
}

impl<'a> Ctx<'a> {
    pub(crate) async fn new(
        check: &'static str,
        store: &'a dyn ApprovalStore,
    ) -> Result<Ctx<'a>, CheckFailure> {
        Ok(Ctx {
            check,
            store,
            fx: Fixtures::new(check).await?,
            t0: SystemClock.now(),
        })
    }

    pub(crate) fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    /// `t0 + millis`.
    pub(crate) fn at(&self, millis: u64) -> Timestamp {
        self.t0.saturating_add(Duration::from_millis(millis))
    }

    pub(crate) fn attempt(&self) -> Result<AttemptId, CheckFailure> {
        AttemptId::generate()
            .map_err(|e| self.fail(format!("could not generate an attempt id: {e}")))
    }

    pub(crate) fn unknown_id(&self) -> Result<ApprovalId, CheckFailure> {
        ApprovalId::generate().map_err(|e| self.fail(format!("could not generate an id: {e}")))
    }

    /// A grant for the first actor, run, URL and action, issued at `issued_at`
    /// for [`TTL`] (not stored yet).
    pub(crate) fn grant_at(&self, issued_at: Timestamp) -> Result<Approval, CheckFailure> {
        Approval::for_action(
            self.fx.actors[0].clone(),
            self.fx.runs[0].clone(),
            &self.fx.urls[0],
            &self.fx.actions[0],
            TTL,
            issued_at,
        )
        .map_err(|e| self.fail(format!("could not build a grant: {e}")))
    }

    /// Builds a grant issued at `t0` and stores it.
    pub(crate) async fn issue_grant(&self) -> Result<Approval, CheckFailure> {
        let approval = self.grant_at(self.t0)?;
        self.issue(&approval).await?;
        Ok(approval)
    }

    pub(crate) async fn issue(&self, approval: &Approval) -> Result<(), CheckFailure> {
        self.store
            .issue(approval.clone())
            .await
            .map_err(|e| self.fail(format!("issuing a new grant `{}` failed: {e}", approval.id)))
    }

    /// Issues `approval` over an existing grant with the same id and expects
    /// `AlreadyExists`.
    pub(crate) async fn issue_duplicate(
        &self,
        step: &str,
        approval: &Approval,
    ) -> Result<(), CheckFailure> {
        match self.store.issue(approval.clone()).await {
            Err(IssueError::AlreadyExists(id)) if id == approval.id => Ok(()),
            Err(IssueError::AlreadyExists(id)) => Err(self.fail(format!(
                "{step}: issue answered AlreadyExists for `{id}`, expected it for `{}`",
                approval.id
            ))),
            Ok(()) => Err(self.fail(format!(
                "{step}: issue accepted a grant whose id `{}` already exists, expected AlreadyExists",
                approval.id
            ))),
            Err(other) => Err(self.fail(format!(
                "{step}: issue failed with `{other}`, expected AlreadyExists"
            ))),
        }
    }

    pub(crate) async fn consume(
        &self,
        step: &str,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
        expected: ConsumeOutcome,
    ) -> Result<(), CheckFailure> {
        let answer = self
            .store
            .consume_once(id, binding, now, attempt)
            .await
            .map_err(|e| {
                self.fail(format!(
                    "{step}: consume_once failed with a store error: {e}"
                ))
            })?;
        self.expect(step, "consume_once", answer, expected)
    }

    pub(crate) async fn abandon(
        &self,
        step: &str,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
        expected: AbandonOutcome,
    ) -> Result<(), CheckFailure> {
        let answer =
            self.store.abandon(id, attempt, now).await.map_err(|e| {
                self.fail(format!("{step}: abandon failed with a store error: {e}"))
            })?;
        self.expect(step, "abandon", answer, expected)
    }

    pub(crate) async fn revoke(
        &self,
        step: &str,
        id: &ApprovalId,
        expected: RevokeOutcome,
    ) -> Result<(), CheckFailure> {
        let answer = self
            .store
            .revoke(id)
            .await
            .map_err(|e| self.fail(format!("{step}: revoke failed with a store error: {e}")))?;
        self.expect(step, "revoke", answer, expected)
    }

    /// Reads `approval.id` and expects exactly `approval` in `state`, with
    /// no failed attempts.
    pub(crate) async fn stored(
        &self,
        step: &str,
        approval: &Approval,
        state: GrantState,
    ) -> Result<(), CheckFailure> {
        self.stored_with_failures(step, approval, state, 0).await
    }

    /// Reads `approval.id` and expects exactly `approval` in `state` after
    /// `failed_attempts` mismatched presentations.
    pub(crate) async fn stored_with_failures(
        &self,
        step: &str,
        approval: &Approval,
        state: GrantState,
        failed_attempts: u32,
    ) -> Result<(), CheckFailure> {
        let expected = Some(StoredGrant {
            approval: approval.clone(),
            state,
            failed_attempts,
        });
        let answer = self.get(step, &approval.id).await?;
        if answer == expected {
            Ok(())
        } else {
            Err(self.fail(format!(
                "{step}: {}",
                describe_difference(&answer, &expected)
            )))
        }
    }

    pub(crate) async fn get(
        &self,
        step: &str,
        id: &ApprovalId,
    ) -> Result<Option<StoredGrant>, CheckFailure> {
        self.store
            .get(id)
            .await
            .map_err(|e| self.fail(format!("{step}: get failed with a store error: {e}")))
    }

    pub(crate) fn expect<T: PartialEq + Debug>(
        &self,
        step: &str,
        call: &str,
        answer: T,
        expected: T,
    ) -> Result<(), CheckFailure> {
        if answer == expected {
            Ok(())
        } else {
            Err(self.fail(format!(
                "{step}: {call} answered {answer:?}, expected {expected:?}"
            )))
        }
    }
}

/// Says how a `get` answer differs from the expected one, naming the fields
/// that differ rather than printing both grants whole.
pub(crate) fn describe_difference(
    answer: &Option<StoredGrant>,
    expected: &Option<StoredGrant>,
) -> String {
    let (got, want) = match (answer, expected) {
        (Some(got), Some(want)) => (got, want),
        (None, Some(want)) => {
            return format!(
                "get answered None, expected grant `{}` in state {:?}",
                want.approval.id, want.state
            );
        }
        (Some(got), None) => {
            return format!(
                "get answered grant `{}` in state {:?}, expected None",
                got.approval.id, got.state
            );
        }
        (None, None) => return "get answered None as expected".to_owned(),
    };
    let mut differences = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {$(
            if got.approval.$field != want.approval.$field {
                differences.push(format!(
                    "{}: got {:?}, expected {:?}",
                    stringify!($field),
                    got.approval.$field,
                    want.approval.$field
                ));
            }
        )*};
    }
    compare!(
        id,
        actor_id,
        run_id,
        url,
        action,
        action_digest,
        issued_at,
        expires_at,
        approver_note,
        approver,
        attempt_limit,
        page_revision,
        operation_id,
        session_id,
        element
    );
    if got.state != want.state {
        differences.push(format!(
            "state: got {:?}, expected {:?}",
            got.state, want.state
        ));
    }
    if got.failed_attempts != want.failed_attempts {
        differences.push(format!(
            "failed_attempts: got {}, expected {}",
            got.failed_attempts, want.failed_attempts
        ));
    }
    if differences.is_empty() {
        "get answered the expected grant".to_owned()
    } else {
        format!(
            "get answered grant `{}` differing in {}",
            want.approval.id,
            differences.join("; ")
        )
    }
}

/// An element identity a record encoding must keep byte for byte: non-ASCII
/// text, quotes and backslashes, a right-to-left override (U+202E) and its
/// pop (U+202C), a four-byte character, bound attributes and two frames
/// (the main frame and an iframe from another origin).
pub(crate) fn element(check: &'static str) -> Result<ElementIdentity, CheckFailure> {
    ElementIdentity::new(
        "button",
        "Pay «5,00 €» to \"Ünïcødé\" \\ \u{202E}gnp.exe\u{202C}",
        "BUTTON",
        "Zahlen \"jetzt\" 😀 \u{202E}txt\u{202C} \\n",
        BTreeMap::from([
            ("formaction".to_owned(), "/pay?to=\"ü\"&x=\\".to_owned()),
            ("type".to_owned(), "submit".to_owned()),
            ("value".to_owned(), "«\u{202E}»\n\t\"".to_owned()),
        ]),
        vec![
            FrameIdentity::new("https://shop.example.com", "D0C-main"),
            FrameIdentity::new("https://pay.example.net:8443", "LOADER\"\\1"),
        ],
    )
    .map_err(|e| setup(check, "element", e))
}

/// An element identity with every field at or near its bound: a 64-byte
/// role and tag, a 512-byte name and text, every bound attribute at 1024
/// bytes full of characters JSON escapes, and eight frames with 256-byte
/// origins and document ids.
pub(crate) fn largest_element(check: &'static str) -> Result<ElementIdentity, CheckFailure> {
    // Exactly `bytes` bytes: `pattern` repeated, then ASCII filler.
    let sized = |pattern: &str, bytes: usize| {
        let mut text = pattern.repeat(bytes / pattern.len());
        text.push_str(&"z".repeat(bytes - text.len()));
        text
    };
    let frames = (0..MAX_FRAMES)
        .map(|i| {
            FrameIdentity::new(
                sized(&format!("https://f{i}.example\"\\"), MAX_FRAME_FIELD_BYTES),
                sized(&format!("doc{i}\"\\{{}}"), MAX_FRAME_FIELD_BYTES),
            )
        })
        .collect();
    ElementIdentity::new(
        sized("r\"\\", MAX_ROLE_BYTES),
        &sized("«ü» \"\\ \u{202E} ", MAX_ACCESSIBLE_NAME_BYTES),
        &sized("t-1", MAX_TAG_BYTES),
        &sized("😀 \"\\ \u{2028} ", MAX_ELEMENT_TEXT_BYTES),
        ELEMENT_ATTRIBUTES
            .iter()
            .map(|name| {
                let value = sized("\"\\\u{0}\n\t\u{2028}😀é ", MAX_ATTRIBUTE_VALUE_BYTES);
                ((*name).to_owned(), value)
            })
            .collect(),
        frames,
    )
    .map_err(|e| setup(check, "largest element", e))
}
