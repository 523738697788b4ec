//! What the templates show, already turned into text, and the pages
//! rendered from it. Every value reaches the page through askama's HTML
//! escaper; no template marks anything safe.

use std::time::Duration;

use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use countersign_approval_core::policy::Action;
use countersign_approval_core::{
    ActorId, ApproverId, ElementIdentity, GrantState, Proposal, ProposalState, ProposalStatus,
    ProposalSummary, RunId, StoredGrant, StoredProposal, Timestamp,
};

use crate::invisible;
use crate::paths::{proposal_path, run_path};

/// `page`, rendered as the HTML answer with `status`; a template that
/// cannot render answers a plain `500` that shows nothing of the page.
pub(crate) fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(target: "countersign_approval_web", %error, "could not render a page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the page could not be shown\n",
            )
                .into_response()
        }
    }
}

/// A short message at the top of a page after a decision or a stop.
pub(crate) struct Notice {
    /// `ok`, `info` or `warn`: a CSS class suffix, never user text.
    pub(crate) kind: &'static str,
    pub(crate) text: String,
}

impl Notice {
    /// What a result link's outcome code says on the proposal's page;
    /// `None` for a code no decision answers.
    pub(crate) fn outcome(code: &str) -> Option<Notice> {
        let (kind, text) = match code {
            "approved" => (
                "ok",
                "Approved: one grant was issued for exactly this action.",
            ),
            "approved-standing" => (
                "ok",
                "Approved with a standing approval: this action, and later ones of the same scope in this run, until its uses are spent or its time is up. Revoke it on the run's page.",
            ),
            "denied" => ("ok", "Denied: no grant was issued."),
            "already-approved" => (
                "info",
                "Already approved, nothing changed: no second grant was issued.",
            ),
            "already-denied" => (
                "info",
                "Already denied, nothing changed: no grant was issued.",
            ),
            "unchanged" => ("info", "Nothing changed."),
            "expired" => (
                "warn",
                "Expired, nothing changed: the proposal can no longer be decided, and no grant was issued.",
            ),
            "stopped" => (
                "warn",
                "The run is stopped, nothing changed: no grant was issued. The host must resume the run and the model propose again.",
            ),
            _ => return None,
        };
        Some(Notice {
            kind,
            text: text.to_owned(),
        })
    }

    /// What a stop's result link says on the run's page: how many grants
    /// it `stopped` and how many `standing` approvals it ended, or that the
    /// run `was` stopped already.
    pub(crate) fn run_stopped(stopped: &str, standing: &str, was: &str) -> Notice {
        if was == "true" {
            Notice {
                kind: "info",
                text: "The run was already stopped, nothing changed: 0 grants stopped.".to_owned(),
            }
        } else {
            let grants = if stopped == "1" { "grant" } else { "grants" };
            let also = match standing {
                "0" => String::new(),
                "1" => " and 1 standing approval".to_owned(),
                n => format!(" and {n} standing approvals"),
            };
            Notice {
                kind: "warn",
                text: format!(
                    "Run stopped: {stopped} {grants}{also} stopped. No grant of this run can be used, and none issued, until the host resumes it."
                ),
            }
        }
    }
}

/// A text the model, a page or the host supplied, as it is, plus an
/// escaped copy when it holds characters that do not show, that look like
/// another, or that reorder the text around them (the one set in
/// [`crate::invisible`]).
pub(crate) struct Shown {
    pub(crate) text: String,
    pub(crate) escaped: Option<String>,
}

impl Shown {
    pub(crate) fn new(text: &str) -> Self {
        Shown {
            text: text.to_owned(),
            escaped: invisible::escaped(text),
        }
    }

    /// The escaped copy when there is one, else the text: for places that
    /// can hold one line of plain text only, such as the page's title.
    pub(crate) fn plain(&self) -> &str {
        self.escaped.as_deref().unwrap_or(&self.text)
    }
}

/// An instant, shown in UTC with its distance from now.
pub(crate) struct When {
    /// `2026-05-01 12:00:00 UTC`.
    pub(crate) text: String,
    /// `2026-05-01T12:00:00.000Z`, for `<time datetime>`.
    pub(crate) iso: String,
    /// `in 5 min`, `2 s ago`, `now`.
    pub(crate) relative: String,
}

impl When {
    pub(crate) fn new(at: Timestamp, now: Timestamp) -> Self {
        let iso = at.to_rfc3339();
        let relative = if at == now {
            "now".to_owned()
        } else if at > now {
            format!("in {}", duration_text(millis_between(now, at)))
        } else {
            format!("{} ago", duration_text(millis_between(at, now)))
        };
        When {
            // `2026-05-01T12:00:00.000Z` read as `2026-05-01 12:00:00 UTC`.
            text: format!("{} {} UTC", &iso[..10], &iso[11..19]),
            iso,
            relative,
        }
    }
}

fn millis_between(earlier: Timestamp, later: Timestamp) -> Duration {
    Duration::from_millis(later.as_millis().saturating_sub(earlier.as_millis()))
}

/// `5 min`, `1 h 30 min`, `45 s`, `250 ms`: the largest two units.
fn duration_text(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        return format!("{millis} ms");
    }
    let seconds = duration.as_secs();
    let (h, m, s) = (seconds / 3600, (seconds / 60) % 60, seconds % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// One row of a run's list.
pub(crate) struct ProposalRow {
    pub(crate) id: String,
    pub(crate) href: String,
    pub(crate) method: String,
    pub(crate) selector: Shown,
    pub(crate) description: Shown,
    pub(crate) url: Shown,
    pub(crate) expires: When,
}

impl ProposalRow {
    /// The row of `stored` in its run's list, linking to its page under
    /// `base`.
    pub(crate) fn new(stored: &StoredProposal, base: &str, now: Timestamp) -> Self {
        let p = &stored.proposal;
        ProposalRow {
            id: p.id.to_string(),
            href: proposal_path(base, &p.id),
            method: p.action.method().to_owned(),
            selector: Shown::new(p.action.selector()),
            description: Shown::new(p.action.description()),
            url: Shown::new(&p.url),
            expires: When::new(p.expires_at, now),
        }
    }
}

/// The pending proposals of one run, and its stop control.
#[derive(Template)]
#[template(path = "run.html")]
pub(crate) struct RunPage {
    pub(crate) base: String,
    pub(crate) approver: Option<Shown>,
    pub(crate) actor: Shown,
    pub(crate) run: Shown,
    pub(crate) notice: Option<Notice>,
    pub(crate) proposals: Vec<ProposalRow>,
    pub(crate) standing: Vec<StandingRow>,
    pub(crate) revoke_action: String,
    pub(crate) stop_action: String,
    pub(crate) stop_token: String,
}

impl RunPage {
    /// The list of `run` of `actor` as `approver` sees it under `base`,
    /// with the stop form signed with `stop_token`.
    pub(crate) fn new(
        base: &str,
        approver: &ApproverId,
        actor: &ActorId,
        run: &RunId,
        notice: Option<Notice>,
        proposals: Vec<ProposalRow>,
        stop_token: String,
    ) -> Self {
        RunPage {
            base: base.to_owned(),
            approver: Some(Shown::new(approver.as_str())),
            actor: Shown::new(actor.as_str()),
            run: Shown::new(run.as_str()),
            notice,
            proposals,
            standing: Vec::new(),
            revoke_action: format!("{}/revoke", run_path(base, actor.as_str(), run.as_str())),
            stop_action: format!("{}/stop", run_path(base, actor.as_str(), run.as_str())),
            stop_token,
        }
    }
}

/// The page a grant is bound to, for a live backend.
pub(crate) struct PageView {
    pub(crate) session: String,
    pub(crate) target: String,
    pub(crate) revision: String,
    /// What the target element is, for an element-bound grant.
    pub(crate) element: Option<ElementView>,
}

/// The target element's identity, as the grant binds it: every value is
/// the page's text, so each gets an escaped copy where it hides characters.
pub(crate) struct ElementView {
    /// One line for people: role, accessible name, what it does.
    pub(crate) summary: Shown,
    pub(crate) role: Shown,
    pub(crate) name: Shown,
    pub(crate) tag: String,
    pub(crate) text: Shown,
    pub(crate) attributes: Vec<(String, Shown)>,
    /// From the main frame down to the target's document: origin and
    /// document id.
    pub(crate) frames: Vec<(Shown, Shown)>,
    /// For a target that submits a form: the form data set it would send,
    /// in order.
    pub(crate) submission: Option<Vec<SubmittedField>>,
}

/// One entry of the form data set a submit would send, as an approver
/// reads it: a text value as the page holds it, a password never (only
/// that it is bound by a hash), a file by its name and size.
pub(crate) struct SubmittedField {
    pub(crate) name: Shown,
    /// `text`, `password` or `file`: a CSS class suffix, never user text.
    pub(crate) kind: &'static str,
    /// The text, or the file's name; `None` for a password.
    pub(crate) value: Option<Shown>,
    /// A file's size in words (`12 bytes`, `no file chosen`).
    pub(crate) size: Option<String>,
}

impl SubmittedField {
    fn new(field: &countersign_approval_core::FormField) -> SubmittedField {
        use countersign_approval_core::FormFieldKind;
        let kind = field.kind();
        SubmittedField {
            name: Shown::new(field.name()),
            kind: kind.as_str(),
            value: match kind {
                FormFieldKind::Password => None,
                _ => Some(Shown::new(field.value())),
            },
            size: field
                .size()
                .map(|size| match (size, field.value().is_empty()) {
                    (0, true) => "no file chosen".to_owned(),
                    (1, _) => "1 byte".to_owned(),
                    (size, _) => format!("{size} bytes"),
                }),
        }
    }
}

impl ElementView {
    pub(crate) fn new(element: &countersign_approval_core::ElementIdentity) -> ElementView {
        ElementView {
            summary: Shown::new(&element.summary()),
            role: Shown::new(element.role()),
            name: Shown::new(element.name()),
            tag: element.tag().to_owned(),
            text: Shown::new(element.text()),
            attributes: element
                .attributes()
                .iter()
                .map(|(name, value)| (name.clone(), Shown::new(value)))
                .collect(),
            frames: element
                .frames()
                .iter()
                .map(|frame| (Shown::new(frame.origin()), Shown::new(frame.document())))
                .collect(),
            submission: element
                .submission()
                .map(|set| set.fields().iter().map(SubmittedField::new).collect()),
        }
    }
}

/// The decision a proposal carries.
pub(crate) struct DecisionView {
    /// `approved` or `denied`.
    pub(crate) what: &'static str,
    pub(crate) by: Option<Shown>,
    pub(crate) at: When,
    pub(crate) approval_id: Option<String>,
    /// What became of the grant since: unused, used, stopped…
    pub(crate) grant_state: Option<String>,
}

impl DecisionView {
    /// The decision `state` carries, `None` while it is pending;
    /// `grant_state` says what became of an approved proposal's grant.
    pub(crate) fn of(
        state: &ProposalState,
        now: Timestamp,
        grant_state: Option<String>,
    ) -> Option<DecisionView> {
        match state {
            ProposalState::Pending => None,
            ProposalState::Approved {
                approval_id,
                by,
                at,
            } => Some(DecisionView {
                what: "approved",
                by: by.as_ref().map(|by| Shown::new(by.as_str())),
                at: When::new(*at, now),
                approval_id: Some(approval_id.to_string()),
                grant_state,
            }),
            ProposalState::Denied { by, at } => Some(DecisionView {
                what: "denied",
                by: by.as_ref().map(|by| Shown::new(by.as_str())),
                at: When::new(*at, now),
                approval_id: None,
                grant_state: None,
            }),
        }
    }
}

/// What became of an approved proposal's grant, in words for the approver.
pub(crate) fn grant_state(stored: &StoredGrant, now: Timestamp) -> String {
    let expires = When::new(stored.approval.expires_at, now);
    match stored.state {
        GrantState::Active if stored.approval.is_expired_at(now) => {
            format!("it expired unused at {}", expires.text)
        }
        GrantState::Active => format!(
            "unused, usable once until {} ({})",
            expires.text, expires.relative
        ),
        GrantState::Consumed { at, .. } => {
            let at = When::new(at, now);
            format!("used at {} ({})", at.text, at.relative)
        }
        GrantState::Revoked => "revoked by the host".to_owned(),
        GrantState::Locked => "locked after too many calls that did not match it".to_owned(),
        GrantState::Stopped => "stopped with its run".to_owned(),
    }
}

/// The forms of a pending proposal.
pub(crate) struct DecisionForms {
    pub(crate) approve_action: String,
    pub(crate) approve_token: String,
    pub(crate) deny_action: String,
    pub(crate) deny_token: String,
    /// "Approve up to N times until T", for a proposal bound to an element.
    pub(crate) standing: Option<StandingOffer>,
}

/// The form of a standing approval and, in words, its scope.
pub(crate) struct StandingOffer {
    pub(crate) action: String,
    pub(crate) token: String,
    pub(crate) covers: Shown,
    pub(crate) not_covered: String,
    pub(crate) hours: [u64; 4],
    pub(crate) max_uses: u32,
}

impl StandingOffer {
    pub(crate) fn new(
        scope: &countersign_approval_core::StandingScope,
        action: String,
        token: String,
    ) -> Self {
        let (covers, not_covered) = scope.describe();
        StandingOffer {
            action,
            token,
            covers: Shown::new(&covers),
            not_covered,
            hours: crate::forms::STANDING_HOURS,
            max_uses: countersign_approval_core::MAX_STANDING_USES,
        }
    }
}

/// One active standing grant on its run's page, with its Revoke.
pub(crate) struct StandingRow {
    pub(crate) id: String,
    pub(crate) covers: Shown,
    pub(crate) uses_left: u32,
    pub(crate) uses: u32,
    pub(crate) approver: Shown,
    pub(crate) expires: When,
    pub(crate) token: String,
}

impl StandingRow {
    /// The row of `stored`, its Revoke signed with `token`.
    pub(crate) fn new(
        stored: &countersign_approval_core::StoredStanding,
        now: Timestamp,
        token: String,
    ) -> Self {
        let grant = &stored.grant;
        let covers = grant.scope.describe().0;
        StandingRow {
            id: grant.id.to_string(),
            covers: Shown::new(&covers),
            uses_left: stored.remaining(),
            uses: grant.uses,
            approver: Shown::new(grant.approver.id.as_str()),
            expires: When::new(grant.expires_at, now),
            token,
        }
    }
}

/// The decision as one sentence built from the bound facts: who wants to
/// do what to which element on which host, e.g. "demo-agent wants to
/// **click** the button **“count”** on **127.0.0.2:42241**".
pub(crate) struct Summary {
    pub(crate) actor: Shown,
    pub(crate) method: String,
    /// `the button`, or `the element` when no element was bound.
    pub(crate) what: String,
    /// The bound element's accessible name, else the selector.
    pub(crate) target: Shown,
    /// Whether `target` is a selector (shown as code) rather than a name.
    pub(crate) by_selector: bool,
    /// Host, and port when the URL names one.
    pub(crate) host: Shown,
    /// The one argument's value, for an action with exactly one (the text
    /// a `fill` types).
    pub(crate) value: Option<Shown>,
}

impl Summary {
    fn of(p: &Proposal) -> Summary {
        let facts = ProposalSummary::of(p);
        let arguments = p.action.arguments();
        Summary {
            actor: Shown::new(&facts.actor),
            what: facts.what(),
            target: Shown::new(facts.target()),
            by_selector: facts.name.is_none(),
            host: Shown::new(&facts.host),
            method: facts.method,
            value: (arguments.len() == 1)
                .then(|| arguments.values().next().map(|v| Shown::new(v)))
                .flatten(),
        }
    }
}

/// Words too common to say which element a description means.
const GENERIC_WORDS: &[&str] = &[
    "a", "an", "and", "box", "button", "checkbox", "click", "combobox", "dropdown", "element",
    "field", "for", "icon", "in", "input", "item", "link", "list", "menu", "of", "on", "option",
    "or", "press", "select", "tab", "textbox", "the", "to",
];

/// The distinctive words of `text`, lower-cased.
fn distinctive_words(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 2 && !GENERIC_WORDS.contains(&word.as_str()))
        .collect()
}

/// The warning for a description (the model's own words, when it gave
/// any) that shares no distinctive word with the bound element's name or
/// visible text: "Submit button" for a button named "Pay $500".
fn description_disagrees(action: &Action, element: &ElementIdentity) -> Option<String> {
    let default = format!("{} {}", action.method(), action.selector());
    if action.description() == default {
        return None;
    }
    let said = distinctive_words(action.description());
    let mut shown = distinctive_words(element.name());
    shown.extend(distinctive_words(element.text()));
    if said.is_empty() || shown.is_empty() || !said.is_disjoint(&shown) {
        return None;
    }
    Some(format!(
        "The model calls this \u{201c}{}\u{201d}, but the page's element is a {} named \u{201c}{}\u{201d}: check the element and the picture before approving.",
        action.description(),
        element.role(),
        element.name()
    ))
}

/// One proposal: exactly what a grant approved from it binds.
#[derive(Template)]
#[template(path = "proposal.html")]
pub(crate) struct ProposalPage {
    pub(crate) base: String,
    pub(crate) approver: Option<Shown>,
    pub(crate) id: String,
    pub(crate) actor: Shown,
    pub(crate) run: Shown,
    pub(crate) run_href: String,
    pub(crate) url: Shown,
    pub(crate) method: String,
    pub(crate) selector: Shown,
    pub(crate) description: Shown,
    /// Set when the model's description names something the bound
    /// element is not: the warning shown beside it.
    pub(crate) description_warning: Option<Shown>,
    pub(crate) arguments: Vec<(String, Shown)>,
    pub(crate) digest: String,
    pub(crate) proposed_at: When,
    pub(crate) expires_at: When,
    pub(crate) grant_ttl: String,
    pub(crate) grant_expires: When,
    pub(crate) page: Option<PageView>,
    /// The decision in one sentence, first on the page.
    pub(crate) summary: Summary,
    pub(crate) screenshot_href: Option<String>,
    /// The screenshot cropped around its target, when the backend recorded
    /// where the target lies in it.
    pub(crate) crop_href: Option<String>,
    pub(crate) target_found: Option<bool>,
    /// `pending`, `stopped` (pending in a stopped run), `approved`,
    /// `denied` or `expired`: a CSS class suffix.
    pub(crate) status: &'static str,
    pub(crate) decision: Option<DecisionView>,
    pub(crate) notice: Option<Notice>,
    pub(crate) forms: Option<DecisionForms>,
}

impl ProposalPage {
    /// Everything `proposal` binds, as `approver` sees it under `base` at
    /// `now`, with the grant lifetime an approval would give; pending,
    /// without a decision, notice or forms until the caller sets them.
    pub(crate) fn new(
        base: &str,
        approver: &ApproverId,
        proposal: &Proposal,
        now: Timestamp,
        grant_ttl: Duration,
    ) -> Self {
        let p = proposal;
        let snapshot = p.snapshot.as_ref();
        ProposalPage {
            base: base.to_owned(),
            approver: Some(Shown::new(approver.as_str())),
            id: p.id.to_string(),
            actor: Shown::new(p.actor_id.as_str()),
            run: Shown::new(p.run_id.as_str()),
            run_href: run_path(base, p.actor_id.as_str(), p.run_id.as_str()),
            url: Shown::new(&p.url),
            method: p.action.method().to_owned(),
            selector: Shown::new(p.action.selector()),
            description: Shown::new(p.action.description()),
            description_warning: snapshot
                .and_then(|s| s.page.element.as_ref())
                .and_then(|element| description_disagrees(&p.action, element))
                .map(|warning| Shown::new(&warning)),
            arguments: p
                .action
                .arguments()
                .iter()
                .map(|(name, value)| (name.clone(), Shown::new(value)))
                .collect(),
            digest: p.action_digest.to_hex(),
            proposed_at: When::new(p.proposed_at, now),
            expires_at: When::new(p.expires_at, now),
            grant_ttl: duration_text(grant_ttl),
            grant_expires: When::new(now.saturating_add(grant_ttl), now),
            page: snapshot.map(|s| PageView {
                session: s.page.session_id.clone(),
                target: s.page.target_id.clone(),
                revision: s.page.page_revision.clone(),
                element: s.page.element.as_ref().map(ElementView::new),
            }),
            summary: Summary::of(p),
            screenshot_href: snapshot
                .filter(|s| s.screenshot_png.is_some())
                .map(|_| format!("{}/screenshot.png", proposal_path(base, &p.id))),
            crop_href: snapshot
                .and_then(|s| s.screenshot_png.as_deref())
                .and_then(crate::crop::recorded_target)
                .map(|_| format!("{}/target.png", proposal_path(base, &p.id))),
            target_found: snapshot.map(|s| s.target_found),
            status: ProposalPage::status(ProposalStatus::Pending, false),
            decision: None,
            notice: None,
            forms: None,
        }
    }

    /// The status a page shows: a pending proposal of a stopped run shows
    /// `stopped`.
    pub(crate) fn status(status: ProposalStatus, run_stopped: bool) -> &'static str {
        match status {
            ProposalStatus::Pending if run_stopped => "stopped",
            ProposalStatus::Pending => "pending",
            ProposalStatus::Approved => "approved",
            ProposalStatus::Denied => "denied",
            ProposalStatus::Expired => "expired",
        }
    }
}

/// An error, with nothing of the store shown.
#[derive(Template)]
#[template(path = "error.html")]
pub(crate) struct ErrorPage {
    pub(crate) base: String,
    pub(crate) approver: Option<Shown>,
    pub(crate) code: u16,
    pub(crate) title: &'static str,
    pub(crate) message: Shown,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pay_button() -> ElementIdentity {
        ElementIdentity::new(
            "button",
            "Pay 120.00 EUR",
            "button",
            "Pay now",
            std::collections::BTreeMap::new(),
            vec![countersign_approval_core::FrameIdentity::new(
                "https://shop.example",
                "loader-1",
            )],
        )
        .unwrap()
    }

    fn click(description: Option<&str>) -> Action {
        let description = description.map_or("click button#pay".to_owned(), str::to_owned);
        Action::from_canonical_json(&format!(
            r#"{{"arguments":{{}},"description":{},"method":"click","selector":"button#pay"}}"#,
            serde_json::to_string(&description).unwrap()
        ))
        .unwrap()
    }

    #[test]
    fn a_description_naming_another_element_is_warned_about() {
        assert_eq!(
            description_disagrees(&click(Some("Submit button")), &pay_button()).as_deref(),
            Some(
                "The model calls this \u{201c}Submit button\u{201d}, but the page's element is a button named \u{201c}Pay 120.00 EUR\u{201d}: check the element and the picture before approving."
            )
        );
        // Any distinctive word in common, in any case: no warning.
        assert_eq!(
            description_disagrees(&click(Some("the PAY button")), &pay_button()),
            None
        );
        // Only generic words, or the default description: nothing to compare.
        assert_eq!(
            description_disagrees(&click(Some("the button")), &pay_button()),
            None
        );
        assert_eq!(description_disagrees(&click(None), &pay_button()), None);
    }

    #[test]
    fn instants_show_in_utc() {
        let at = |ms| When::new(Timestamp::from_millis(ms), Timestamp::from_millis(ms));
        assert_eq!(at(0).text, "1970-01-01 00:00:00 UTC");
        assert_eq!(at(0).iso, "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000).text, "2000-02-29 00:00:00 UTC");
        assert_eq!(at(1_767_225_599_999).iso, "2025-12-31T23:59:59.999Z");
        assert_eq!(at(4_107_542_400_000).text, "2100-03-01 00:00:00 UTC");
        // A saturated instant reads as the last one the formatter knows.
        assert_eq!(at(u64::MAX).text, "9999-12-30 22:00:00 UTC");
        assert_eq!(at(5).relative, "now");
    }

    #[test]
    fn distances_read_as_words() {
        let now = Timestamp::from_millis(1_000_000);
        let later = |ms: u64| When::new(Timestamp::from_millis(1_000_000 + ms), now).relative;
        assert_eq!(later(300_000), "in 5 min");
        assert_eq!(later(90_000), "in 1 min 30 s");
        assert_eq!(later(5_400_000), "in 1 h 30 min");
        assert_eq!(later(86_400_000), "in 24 h");
        assert_eq!(later(250), "in 250 ms");
        assert_eq!(
            When::new(Timestamp::from_millis(0), now).relative,
            "16 min 40 s ago"
        );
    }

    #[test]
    fn hidden_characters_get_an_escaped_copy() {
        let plain = Shown::new("a#docs <b>");
        assert_eq!(plain.escaped, None);
        assert_eq!(plain.plain(), "a#docs <b>");
        let shown = Shown::new("pay\u{202e}evil\nx\u{200b}");
        assert_eq!(shown.text, "pay\u{202e}evil\nx\u{200b}");
        assert_eq!(
            shown.escaped.as_deref(),
            Some("pay\\u{202e}evil\\u{000a}x\\u{200b}")
        );
        assert_eq!(shown.plain(), "pay\\u{202e}evil\\u{000a}x\\u{200b}");
    }
}
