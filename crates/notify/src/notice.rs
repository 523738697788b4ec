//! What a notification says: the event, the proposal's summary (never an
//! argument value or a picture) and the link to its approval page.

use countersign_approval_core::{
    DecidedBy, NotificationEvent, NotificationKind, ProposalId, ProposalState, ProposalSummary,
    StoredProposal, Timestamp,
};
use serde_json::{Value, json};

/// The link to a proposal's approval page, made by the host (which knows
/// where its pages are served): `https://approve.example.com/proposals/prp_…`.
pub type ApprovalLink = std::sync::Arc<dyn Fn(&ProposalId) -> String + Send + Sync>;

/// How a proposal was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeDecision {
    /// `true` when approved, `false` when denied.
    pub approved: bool,
    /// A person, a rule or a standing grant.
    pub decided_by: DecidedBy,
    /// The person who decided, as the host's sign-in named them; `None` for
    /// a rule's or a standing grant's decision.
    pub approver: Option<String>,
    /// When.
    pub at: Timestamp,
}

impl NoticeDecision {
    /// `approved` or `denied`.
    pub fn outcome(&self) -> &'static str {
        if self.approved { "approved" } else { "denied" }
    }
}

/// One notification, as every notifier receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalNotice {
    /// What happened; its id is the idempotency key receivers deduplicate on.
    pub event: NotificationEvent,
    /// The proposal's summary; `None` for a stopped run, or a proposal the
    /// store no longer holds.
    pub summary: Option<ProposalSummary>,
    /// When the proposal expires.
    pub expires_at: Option<Timestamp>,
    /// How it was decided, once decided.
    pub decision: Option<NoticeDecision>,
    /// Its approval page (which asks the person to sign in first).
    pub link: Option<String>,
}

impl ProposalNotice {
    /// The notice of `event` about `stored` (the proposal as the store
    /// holds it now, when it has one).
    pub fn new(
        event: NotificationEvent,
        stored: Option<&StoredProposal>,
        link: &ApprovalLink,
    ) -> ProposalNotice {
        let decision = stored.and_then(|stored| match &stored.state {
            ProposalState::Pending => None,
            ProposalState::Approved { by, at, .. } => Some(decision(true, by.as_ref(), *at)),
            ProposalState::Denied { by, at } => Some(decision(false, by.as_ref(), *at)),
        });
        ProposalNotice {
            summary: stored.map(|s| ProposalSummary::of(&s.proposal)),
            expires_at: stored.map(|s| s.proposal.expires_at),
            decision,
            link: event.proposal_id.as_ref().map(|id| link(id)),
            event,
        }
    }

    /// One line of plain text: what happened and to what.
    pub fn headline(&self) -> String {
        let what = self
            .summary
            .as_ref()
            .map_or_else(|| "a proposal".to_owned(), ProposalSummary::sentence);
        match (self.event.kind, &self.decision) {
            (NotificationKind::Created, _) => format!("Approval needed: {what}"),
            (NotificationKind::Expiring, _) => format!(
                "Expires at {}: {what}",
                self.expires_at
                    .unwrap_or(self.event.occurred_at)
                    .to_rfc3339()
            ),
            (NotificationKind::Decided, Some(decision)) => {
                format!("{} by {}: {what}", decision.outcome(), decider(decision))
            }
            (NotificationKind::Decided, None) => format!("Decided: {what}"),
            (NotificationKind::Expired, _) => format!("Expired, nobody decided: {what}"),
            (NotificationKind::RunStopped, _) => match &self.event.run_id {
                Some(run) => format!(
                    "Run `{}` of {} was stopped",
                    run.as_str(),
                    self.event.actor_id.as_str()
                ),
                None => format!("Every run of {} was stopped", self.event.actor_id.as_str()),
            },
            _ => what,
        }
    }

    /// The JSON a webhook carries: `{"type", "timestamp", "data"}`, the
    /// shape Standard Webhooks recommends. `data` holds ids, the summary's
    /// facts, the expiry, the decision and the link; never an argument
    /// value.
    pub fn to_json(&self) -> Value {
        let event = &self.event;
        let mut data = json!({
            "event_id": event.id.as_str(),
            "actor_id": event.actor_id.as_str(),
            "run_id": event.run_id.as_ref().map(|r| r.as_str()),
            "proposal_id": event.proposal_id.as_ref().map(|p| p.as_str()),
            "headline": self.headline(),
        });
        if let Some(object) = data.as_object_mut() {
            if let Some(summary) = &self.summary {
                object.insert(
                    "summary".to_owned(),
                    json!({
                        "sentence": summary.sentence(),
                        "method": summary.method,
                        "role": summary.role,
                        "name": summary.name,
                        "selector": summary.selector,
                        "host": summary.host,
                        "path": summary.path,
                    }),
                );
            }
            if let Some(at) = self.expires_at {
                object.insert("expires_at".to_owned(), json!(at.to_rfc3339()));
            }
            if let Some(decision) = &self.decision {
                object.insert(
                    "decision".to_owned(),
                    json!({
                        "outcome": decision.outcome(),
                        "decided_by": decision.decided_by.as_str(),
                        "approver": decision.approver,
                        "at": decision.at.to_rfc3339(),
                    }),
                );
            }
            if let Some(link) = &self.link {
                object.insert("approval_url".to_owned(), json!(link));
            }
        }
        json!({
            "type": event.kind.as_str(),
            "timestamp": event.occurred_at.to_rfc3339(),
            "data": data,
        })
    }
}

fn decision(
    approved: bool,
    by: Option<&countersign_approval_core::ApproverId>,
    at: Timestamp,
) -> NoticeDecision {
    let decided_by = DecidedBy::of(by);
    NoticeDecision {
        approved,
        decided_by,
        approver: (decided_by == DecidedBy::Person)
            .then(|| by.map(|b| b.as_str().to_owned()))
            .flatten(),
        at,
    }
}

/// `alice`, `a rule`, `a standing approval`, `someone`.
fn decider(decision: &NoticeDecision) -> String {
    match (decision.decided_by, &decision.approver) {
        (DecidedBy::Person, Some(name)) => name.clone(),
        (DecidedBy::Rule, _) => "a rule".to_owned(),
        (DecidedBy::Standing, _) => "a standing approval".to_owned(),
        _ => "someone".to_owned(),
    }
}
