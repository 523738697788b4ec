//! The Router without a browser: headers, authentication, refusals, and
//! that only an authenticated, same-origin POST with its form token changes
//! anything.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use countersign_approval_core::{
    ApprovalStore, Approver, ApproverId, PageBinding, PageSnapshot, Proposal, ProposalState,
    ProposalStore, RunId,
};
use countersign_approval_web::{
    ApprovalPages, ApprovalPagesError, Approvers, DEFAULT_GRANT_TTL, Parts,
};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::{CookieApprovers, Host, OFF_LIMITS_RUN, TINY_PNG, form_token};
use tower::ServiceExt;

const CSP: &str = "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
    bytes: Vec<u8>,
}

/// How a request reaches the pages in these tests.
#[derive(Clone, Copy)]
enum From {
    /// A browser on the pages' own origin.
    SameOrigin,
    /// A browser on another site.
    CrossSite,
    /// Another origin on the same site (another port).
    SameSite,
    /// An old browser, without `Sec-Fetch-Site`, on another origin.
    ForeignOrigin,
    /// A client that sends neither header (curl, a test).
    NoBrowser,
}

async fn send(
    app: &Router,
    method: Method,
    path: &str,
    who: Option<&str>,
    from: From,
    form: Option<&str>,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "pages.test");
    if let Some(who) = who {
        request = request.header(header::COOKIE, format!("theme=dark; test-approver={who}"));
    }
    request = match from {
        From::SameOrigin => request
            .header("sec-fetch-site", "same-origin")
            .header(header::ORIGIN, "http://pages.test"),
        From::CrossSite => request
            .header("sec-fetch-site", "cross-site")
            .header(header::ORIGIN, "http://evil.test"),
        From::SameSite => request
            .header("sec-fetch-site", "same-site")
            .header(header::ORIGIN, "http://pages.test:8443"),
        From::ForeignOrigin => request.header(header::ORIGIN, "http://evil.test"),
        From::NoBrowser => request,
    };
    let body = match form {
        Some(form) => {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            Body::from(form.to_owned())
        }
        None => Body::empty(),
    };
    let response = app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    }
}

async fn get(app: &Router, path: &str, who: Option<&str>) -> Answer {
    send(app, Method::GET, path, who, From::SameOrigin, None).await
}

async fn post(app: &Router, path: &str, who: Option<&str>, from: From, form: &str) -> Answer {
    send(app, Method::POST, path, who, from, Some(form)).await
}

fn click() -> Value {
    json!({"method": "click", "selector": "button#pay", "description": "pay the invoice", "arguments": {"amount": "12.50", "currency": "EUR"}})
}

fn assert_strict_headers(answer: &Answer, what: &str) {
    let h = &answer.headers;
    assert_eq!(h["content-security-policy"], CSP, "{what}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "no-referrer", "{what}");
    assert_eq!(h["cache-control"], "no-store", "{what}");
    assert_eq!(h["x-frame-options"], "DENY", "{what}");
}

async fn assert_pending_without_grant(host: &Host, proposal: &Proposal) {
    let stored = host
        .store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, ProposalState::Pending);
    assert_eq!(host.store.len().unwrap(), 0, "no grant may exist");
}

fn proposal_path(proposal: &Proposal) -> String {
    ApprovalPages::proposal_path(&proposal.id)
}

fn run_path(host: &Host) -> String {
    ApprovalPages::run_path(&host.actor, &host.run)
}

#[tokio::test]
async fn every_response_carries_the_strict_headers() {
    let host = Host::new();
    let app = host.router();
    let plain = host.propose(&click()).await;
    let snapshot = PageSnapshot {
        page: PageBinding {
            session_id: "s1".into(),
            target_id: "t1".into(),
            page_revision: "r1".into(),
            element: None,
        },
        screenshot_png: Some(TINY_PNG.to_vec()),
        target_found: true,
    };
    let observed = host.propose_observed(&click(), snapshot).await;
    let page = get(&app, &proposal_path(&plain), Some("alice")).await;
    let token = form_token(&page.body, "/approve").unwrap();

    let answers = [
        (
            "run page",
            get(&app, &run_path(&host), Some("alice")).await,
            200,
        ),
        ("proposal page", page, 200),
        (
            "screenshot",
            get(
                &app,
                &format!("{}/screenshot.png", proposal_path(&observed)),
                Some("alice"),
            )
            .await,
            200,
        ),
        (
            "no screenshot",
            get(
                &app,
                &format!("{}/screenshot.png", proposal_path(&plain)),
                Some("alice"),
            )
            .await,
            404,
        ),
        ("stylesheet", get(&app, "/style.css", None).await, 200),
        (
            "unauthenticated",
            get(&app, &run_path(&host), None).await,
            401,
        ),
        (
            "unknown",
            get(
                &app,
                "/proposals/prp_00000000000000000000000000000000",
                Some("alice"),
            )
            .await,
            404,
        ),
        (
            "malformed",
            get(&app, "/proposals/not%20an%20id", Some("alice")).await,
            400,
        ),
        (
            "off limits",
            get(
                &app,
                &ApprovalPages::run_path(&host.actor, &RunId::new(OFF_LIMITS_RUN).unwrap()),
                Some("alice"),
            )
            .await,
            403,
        ),
        (
            "cross-site",
            post(
                &app,
                &format!("{}/approve", proposal_path(&plain)),
                Some("alice"),
                From::CrossSite,
                &format!("token={token}"),
            )
            .await,
            403,
        ),
        (
            "bad token",
            post(
                &app,
                &format!("{}/approve", proposal_path(&plain)),
                Some("alice"),
                From::SameOrigin,
                "token=00",
            )
            .await,
            403,
        ),
        (
            "wrong method",
            send(
                &app,
                Method::PUT,
                &proposal_path(&plain),
                Some("alice"),
                From::SameOrigin,
                None,
            )
            .await,
            405,
        ),
        (
            "redirect",
            post(
                &app,
                &format!("{}/approve", proposal_path(&plain)),
                Some("alice"),
                From::SameOrigin,
                &format!("token={token}"),
            )
            .await,
            303,
        ),
    ];
    for (what, answer, status) in &answers {
        assert_eq!(answer.status.as_u16(), *status, "{what}: {}", answer.body);
        assert_strict_headers(answer, what);
    }
    let content_type = |i: usize| {
        answers[i].1.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(content_type(0), "text/html; charset=utf-8");
    assert_eq!(content_type(2), "image/png");
    assert_eq!(answers[2].1.bytes, TINY_PNG);
    assert_eq!(content_type(4), "text/css; charset=utf-8");
}

#[tokio::test]
async fn without_authentication_every_route_is_401_and_shows_nothing() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    let deny = form_token(&page.body, "/deny").unwrap();
    let run = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run.body, "/stop").unwrap();

    let base = proposal_path(&proposal);
    for answer in [
        get(&app, &run_path(&host), None).await,
        get(&app, &base, None).await,
        get(&app, &format!("{base}/screenshot.png"), None).await,
        get(
            &app,
            "/proposals/prp_00000000000000000000000000000000",
            None,
        )
        .await,
        get(&app, "/proposals/%3Cscript%3E", None).await,
        // A cookie of another name, or an empty approver, is nobody.
        send(&app, Method::GET, &base, Some(""), From::SameOrigin, None).await,
        post(
            &app,
            &format!("{base}/approve"),
            None,
            From::SameOrigin,
            &format!("token={approve}"),
        )
        .await,
        post(
            &app,
            &format!("{base}/deny"),
            None,
            From::SameOrigin,
            &format!("token={deny}"),
        )
        .await,
        post(
            &app,
            &format!("{}/stop", run_path(&host)),
            None,
            From::SameOrigin,
            &format!("token={stop}"),
        )
        .await,
    ] {
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
        assert!(answer.body.contains("sign in to review proposals"));
        for secret in [
            proposal.id.as_str(),
            "button#pay",
            "pay the invoice",
            "12.50",
            "actor-1",
            "run-1",
            "docs.example.com",
        ] {
            assert!(!answer.body.contains(secret), "a 401 page shows `{secret}`");
        }
    }
    assert_pending_without_grant(&host, &proposal).await;
    // The run was not stopped either: a new proposal is still accepted.
    host.propose(&click()).await;
}

#[tokio::test]
async fn unknown_and_malformed_addresses_say_what_is_wrong() {
    let host = Host::new();
    let app = host.router();
    let unknown = get(
        &app,
        "/proposals/prp_0123456789abcdef0123456789abcdef",
        Some("alice"),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(
        unknown
            .body
            .contains("no proposal `prp_0123456789abcdef0123456789abcdef`"),
        "{}",
        unknown.body
    );

    let malformed = get(&app, "/proposals/prp%3Cb%3E", Some("alice")).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    assert!(
        malformed
            .body
            .contains("`prp&#60;b&#62;` is not a proposal id"),
        "{}",
        malformed.body
    );

    let bad_utf8 = get(&app, "/proposals/%FF", Some("alice")).await;
    assert_eq!(bad_utf8.status, StatusCode::BAD_REQUEST);
    assert!(
        bad_utf8
            .body
            .contains("the proposal id in the address is not valid text")
    );

    let control = get(&app, "/runs/actor%0A1/run-1", Some("alice")).await;
    assert_eq!(control.status, StatusCode::BAD_REQUEST);
    assert!(
        control
            .body
            .contains("actor id must be 1 to 256 bytes without control characters"),
        "{}",
        control.body
    );

    let long_run = format!("/runs/actor-1/{}", "r".repeat(257));
    let long = get(&app, &long_run, Some("alice")).await;
    assert_eq!(long.status, StatusCode::BAD_REQUEST);
    assert!(long.body.contains("run id must be 1 to 256 bytes"));

    let approve_unknown = post(
        &app,
        "/proposals/prp_0123456789abcdef0123456789abcdef/approve",
        Some("alice"),
        From::SameOrigin,
        "token=",
    )
    .await;
    // The token is checked first: a form for an unknown proposal cannot carry one.
    assert_eq!(approve_unknown.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn get_never_changes_state() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let base = proposal_path(&proposal);
    let page = get(&app, &base, Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    let run = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run.body, "/stop").unwrap();

    for path in [
        base.clone(),
        format!("{base}?outcome=approved&tag=00"),
        format!("{base}/approve"),
        format!("{base}/approve?token={approve}"),
        format!("{base}/deny?token={approve}"),
        format!("{base}/screenshot.png"),
        run_path(&host),
        format!("{}/stop", run_path(&host)),
        format!("{}/stop?token={stop}", run_path(&host)),
        format!("{}?stopped=3&was=false&tag=00", run_path(&host)),
    ] {
        for method in [Method::GET, Method::HEAD] {
            let answer = send(
                &app,
                method.clone(),
                &path,
                Some("alice"),
                From::SameOrigin,
                None,
            )
            .await;
            assert!(
                [200, 404, 405].contains(&answer.status.as_u16()),
                "{method} {path}: {}",
                answer.status
            );
            assert_strict_headers(&answer, &path);
        }
    }
    assert_pending_without_grant(&host, &proposal).await;
    // Not stopped: the run still takes proposals, and the proposal is listed.
    host.propose(&click()).await;
    let listed = host
        .store
        .pending_proposals(&host.actor, &host.run, host.clock_now())
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
}

#[tokio::test]
async fn a_cross_site_post_is_refused_and_changes_nothing() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let base = proposal_path(&proposal);
    let page = get(&app, &base, Some("alice")).await;
    // Even with a valid token (as if it leaked), a cross-site post fails.
    let approve = form_token(&page.body, "/approve").unwrap();
    let deny = form_token(&page.body, "/deny").unwrap();
    let run = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run.body, "/stop").unwrap();

    for from in [From::CrossSite, From::SameSite, From::ForeignOrigin] {
        for (path, token) in [
            (format!("{base}/approve"), &approve),
            (format!("{base}/deny"), &deny),
            (format!("{}/stop", run_path(&host)), &stop),
        ] {
            let answer = post(&app, &path, Some("alice"), from, &format!("token={token}")).await;
            assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
            assert!(
                answer
                    .body
                    .contains("posted from another site; nothing changed")
            );
            assert_strict_headers(&answer, &path);
        }
    }
    assert_pending_without_grant(&host, &proposal).await;
    host.propose(&click()).await;
}

#[tokio::test]
async fn a_post_without_its_own_form_token_is_refused() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let other = host
        .propose(&json!({"method": "click", "selector": "#other"}))
        .await;
    let base = proposal_path(&proposal);
    let alice = get(&app, &base, Some("alice")).await;
    let alice_approve = form_token(&alice.body, "/approve").unwrap();
    let alice_deny = form_token(&alice.body, "/deny").unwrap();
    let bob = get(&app, &base, Some("bob")).await;
    let bob_approve = form_token(&bob.body, "/approve").unwrap();
    let other_page = get(&app, &proposal_path(&other), Some("alice")).await;
    let other_approve = form_token(&other_page.body, "/approve").unwrap();
    assert_ne!(
        alice_approve, bob_approve,
        "tokens are bound to the approver"
    );

    for (who, form) in [
        ("alice", String::new()),
        ("alice", "token=".to_owned()),
        ("alice", "token=zz".to_owned()),
        ("alice", format!("token={bob_approve}")),
        ("bob", format!("token={alice_approve}")),
        ("alice", format!("token={alice_deny}")),
        ("alice", format!("token={other_approve}")),
        ("alice", format!("token={}", alice_approve.to_uppercase())),
    ] {
        for from in [From::SameOrigin, From::NoBrowser] {
            let answer = post(&app, &format!("{base}/approve"), Some(who), from, &form).await;
            assert_eq!(answer.status, StatusCode::FORBIDDEN, "{who} {form}");
            assert!(
                answer
                    .body
                    .contains("this form was not issued to you for this decision")
            );
        }
    }
    let deny_with_approve = post(
        &app,
        &format!("{base}/deny"),
        Some("alice"),
        From::SameOrigin,
        &format!("token={alice_approve}"),
    )
    .await;
    assert_eq!(deny_with_approve.status, StatusCode::FORBIDDEN);
    let run = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run.body, "/stop").unwrap();
    let bob_stop = post(
        &app,
        &format!("{}/stop", run_path(&host)),
        Some("bob"),
        From::SameOrigin,
        &format!("token={stop}"),
    )
    .await;
    assert_eq!(bob_stop.status, StatusCode::FORBIDDEN);
    assert_pending_without_grant(&host, &proposal).await;

    // The same form from its own approver is taken.
    let own = post(
        &app,
        &format!("{base}/approve"),
        Some("bob"),
        From::NoBrowser,
        &format!("token={bob_approve}"),
    )
    .await;
    assert_eq!(own.status, StatusCode::SEE_OTHER, "{}", own.body);
}

#[tokio::test]
async fn approving_issues_exactly_one_grant_and_a_second_decision_says_so() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let base = proposal_path(&proposal);
    let page = get(&app, &base, Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    let deny = form_token(&page.body, "/deny").unwrap();
    host.clock.advance(Duration::from_secs(30));
    let approved_at = host.clock_now();

    let answer = post(
        &app,
        &format!("{base}/approve"),
        Some("alice"),
        From::SameOrigin,
        &format!("token={approve}&note=checked+the+amount"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    let location = answer.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!("{base}?outcome=approved&tag=")),
        "{location}"
    );

    let stored = host
        .store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap();
    let ProposalState::Approved {
        approval_id,
        by,
        at,
    } = stored.state
    else {
        panic!("not approved: {:?}", stored.state);
    };
    assert_eq!(by, Some(ApproverId::new("alice").unwrap()));
    assert_eq!(at, approved_at);
    assert_eq!(host.store.len().unwrap(), 1);
    let grant = host
        .store
        .get(&approval_id)
        .await
        .unwrap()
        .unwrap()
        .approval;
    assert!(proposal.is_approved_by(&grant));
    assert_eq!(
        grant.approver,
        Some(Approver {
            id: ApproverId::new("alice").unwrap(),
            approved_at
        })
    );
    assert_eq!(grant.issued_at, approved_at);
    assert_eq!(
        grant.expires_at,
        approved_at.saturating_add(DEFAULT_GRANT_TTL)
    );
    assert_eq!(grant.approver_note.as_deref(), Some("checked the amount"));

    let result = get(&app, &location, Some("alice")).await;
    assert!(
        result
            .body
            .contains("Approved: one grant was issued for exactly this action."),
        "{}",
        result.body
    );
    assert!(result.body.contains(approval_id.as_str()));
    assert!(
        result.body.contains("<span class=\"grant-state\">unused, usable once until 2026-05-01 12:05:30 UTC (in 5 min)</span>"),
        "{}",
        result.body
    );
    assert!(
        !result.body.contains("id=\"approve\""),
        "no Approve button on a decided proposal"
    );

    // The same form again (a second tab, a resubmission): nothing changes.
    for (path, token, code, text) in [
        (
            "approve",
            &approve,
            "already-approved",
            "Already approved, nothing changed: no second grant was issued.",
        ),
        (
            "deny",
            &deny,
            "already-approved",
            "Already approved, nothing changed",
        ),
    ] {
        let again = post(
            &app,
            &format!("{base}/{path}"),
            Some("alice"),
            From::SameOrigin,
            &format!("token={token}"),
        )
        .await;
        assert_eq!(again.status, StatusCode::SEE_OTHER);
        let location = again.headers[header::LOCATION].to_str().unwrap().to_owned();
        assert!(location.contains(&format!("outcome={code}&")), "{location}");
        let shown = get(&app, &location, Some("alice")).await;
        assert!(shown.body.contains(text), "{}", shown.body);
    }
    assert_eq!(host.store.len().unwrap(), 1, "still exactly one grant");

    // The Act tool performs it once.
    let act = host.act();
    let call = Host::act_call(&click(), approval_id.as_str());
    assert_eq!(act.execute_json(&call).await["status"], "ok");
    assert_eq!(
        act.execute_json(&call).await["error"]["code"],
        "APPROVAL_STALE"
    );
    assert_eq!(host.backend.len(), 1);
    let used = get(&app, &proposal_path(&proposal), Some("alice")).await;
    assert!(
        used.body
            .contains("<span class=\"grant-state\">used at 2026-05-01 12:00:30 UTC (now)</span>"),
        "{}",
        used.body
    );
}

#[tokio::test]
async fn result_links_are_signed_for_their_approver() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let base = proposal_path(&proposal);
    let page = get(&app, &base, Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    let answer = post(
        &app,
        &format!("{base}/approve"),
        Some("alice"),
        From::SameOrigin,
        &format!("token={approve}"),
    )
    .await;
    let location = answer.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();

    // Bob following Alice's link sees the state, not her outcome.
    let bob = get(&app, &location, Some("bob")).await;
    assert!(bob.body.contains("Approved"));
    assert!(
        !bob.body
            .contains("one grant was issued for exactly this action")
    );
    // A link whose outcome was changed shows no outcome.
    let forged = location.replace("outcome=approved", "outcome=denied");
    let shown = get(&app, &forged, Some("alice")).await;
    assert!(!shown.body.contains("Denied: no grant was issued"));
    let run = format!(
        "{}?stopped=7&was=false&tag=00000000000000000000000000000000",
        run_path(&host)
    );
    assert!(
        !get(&app, &run, Some("alice"))
            .await
            .body
            .contains("Run stopped")
    );
}

#[tokio::test]
async fn the_page_shows_everything_the_grant_binds() {
    let host = Host::new();
    let app = host.router();
    let action = json!({
        "method": "fill", "selector": "input[name=\"amount\"]", "description": "enter the amount",
        "arguments": {"value": "120.00", "note": "rent & \"bills\"", "flag": true, "count": 3},
    });
    let proposal = host.propose(&action).await;
    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    for shown in [
        "<html lang=\"en\">",
        "https://docs.example.com/account",
        "<code id=\"method\">fill</code>",
        "<code id=\"selector\">input[name=&#34;amount&#34;]</code>",
        "enter the amount",
        "<code>value</code></th><td><code class=\"argument\">120.00</code>",
        "<code>note</code></th><td><code class=\"argument\">rent &#38; &#34;bills&#34;</code>",
        "<code>flag</code></th><td><code class=\"argument\">true</code>",
        "<code>count</code></th><td><code class=\"argument\">3</code>",
        &proposal.action_digest.to_hex(),
        "<code id=\"actor\">actor-1</code>",
        "<code id=\"run\">run-1</code>",
        // What approving opens, and what a rule's approval does not.
        "<p id=\"writes-note\">Approving lets the page write (post a form, pay, save a change) from this action on, until the agent's next action that a rule approved. An action a rule approves runs read-only: the browser refuses every request from the page but GET, HEAD and OPTIONS, and every new WebSocket, except writes the host allows by name.</p>",
        // Grant lifetime and the expiry it would have if approved now.
        "5 min: approved now, it is usable until <time datetime=\"2026-05-01T12:05:00.000Z\">2026-05-01 12:05:00 UTC</time>",
        // The proposal's own expiry (10 minutes).
        "<time datetime=\"2026-05-01T12:10:00.000Z\">2026-05-01 12:10:00 UTC</time> (in 10 min)",
        "none: the backend has no pages",
        "Signed in as <strong>alice</strong>",
        "<button type=\"submit\" id=\"approve\" class=\"approve\">Approve</button>",
        "<button type=\"submit\" id=\"deny\" class=\"deny\">Deny</button>",
        "<label for=\"note\">",
        "<link rel=\"stylesheet\" href=\"/style.css\">",
    ] {
        assert!(body.contains(shown), "the page lacks `{shown}`:\n{body}");
    }
    assert!(!body.contains("<script"), "no script on the pages");
    assert!(!body.contains("style=\""), "no inline style");

    // The run list shows it, one card a proposal, URL and action first.
    let run = get(&app, &run_path(&host), Some("alice")).await;
    for shown in [
        "<h2 id=\"pending-heading\">Pending proposals, oldest first</h2>\n<ol class=\"proposals\">\n<li class=\"proposal\">",
        &format!(
            "<h3><a class=\"review\" href=\"/proposals/{}\">Review <code class=\"proposal-id\">{}</code></a></h3>",
            proposal.id, proposal.id
        ),
        "<dt>URL</dt><dd><code class=\"url\">https://docs.example.com/account</code></dd>",
        "<dt>Action</dt><dd><code class=\"method\">fill</code> <code class=\"selector\">input[name=&#34;amount&#34;]</code></dd>",
        "<dd><span class=\"text description\">enter the amount</span></dd>",
        "<dt>Decide before</dt><dd><time datetime=\"2026-05-01T12:10:00.000Z\">2026-05-01 12:10:00 UTC</time> (in 10 min)</dd>",
        "<button type=\"submit\" class=\"stop-run\">Stop run</button>",
    ] {
        assert!(
            run.body.contains(shown),
            "the run page lacks `{shown}`:\n{}",
            run.body
        );
    }
}

#[tokio::test]
async fn every_page_gives_invisible_characters_an_escaped_copy() {
    let host = Host::for_run("actor\u{202e}1", "run\u{2800}");
    let app = host.router();
    let action = json!({
        "method": "click", "selector": "a\u{200b}#docs",
        "description": "open the docs\u{202e}llA eteleD",
        "arguments": {"amount": "1\u{3000}000"},
    });
    let proposal = host.propose(&action).await;
    let flagged = |text: &str, escaped: &str| {
        format!(
            "{text}<span class=\"hidden-chars\">Holds invisible characters: <code>{escaped}</code></span>"
        )
    };

    let run = get(&app, &run_path(&host), Some("alice")).await;
    assert_eq!(run.status, StatusCode::OK);
    for shown in [
        "<title>Run run\\u{2800} · countersign approvals</title>".to_owned(),
        flagged(
            "<code id=\"actor\">actor\u{202e}1</code>",
            "actor\\u{202e}1",
        ),
        flagged("<code id=\"run\">run\u{2800}</code>", "run\\u{2800}"),
        flagged(
            "<code class=\"selector\">a\u{200b}#docs</code>",
            "a\\u{200b}#docs",
        ),
        flagged(
            "<span class=\"text description\">open the docs\u{202e}llA eteleD</span>",
            "open the docs\\u{202e}llA eteleD",
        ),
    ] {
        assert!(
            run.body.contains(&shown),
            "the run page lacks `{shown}`:\n{}",
            run.body
        );
    }
    assert_eq!(run.body.matches("class=\"hidden-chars\"").count(), 4);

    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    assert_eq!(page.status, StatusCode::OK);
    for shown in [
        flagged(
            "<code id=\"actor\">actor\u{202e}1</code>",
            "actor\\u{202e}1",
        ),
        flagged("<code id=\"run\">run\u{2800}</code></a>", "run\\u{2800}"),
        flagged(
            "<code id=\"selector\">a\u{200b}#docs</code>",
            "a\\u{200b}#docs",
        ),
        flagged(
            "<span id=\"description\" class=\"text\">open the docs\u{202e}llA eteleD</span>",
            "open the docs\\u{202e}llA eteleD",
        ),
        flagged(
            "<code class=\"argument\">1\u{3000}000</code>",
            "1\\u{3000}000",
        ),
    ] {
        assert!(
            page.body.contains(&shown),
            "the proposal page lacks `{shown}`:\n{}",
            page.body
        );
    }
    // The summary sentence flags the actor, the selector (no element was
    // bound) and the one argument again.
    assert!(
        page.body.contains("<p id=\"summary\" class=\"summary\"><span class=\"text\">actor\u{202e}1</span> wants to <strong>click</strong> the element <code>a\u{200b}#docs</code> on <strong class=\"text\">docs.example.com</strong> with <strong class=\"text\">“1\u{3000}000”</strong>.</p>"),
        "{}",
        page.body
    );
    assert_eq!(page.body.matches("class=\"hidden-chars\"").count(), 8);

    // Who decided, from the host's authentication, too.
    let bob = ApproverId::new("bob\u{200b}").unwrap();
    host.store
        .deny_proposal(&proposal.id, Some(&bob), host.clock_now())
        .await
        .unwrap();
    let denied = get(&app, &proposal_path(&proposal), Some("alice")).await;
    let by = flagged("Denied by <strong>bob\u{200b}</strong>", "bob\\u{200b}");
    assert!(denied.body.contains(&by), "{}", denied.body);

    // And an error page quoting the address.
    let filler = get(&app, "/proposals/prp%E3%85%A4", Some("alice")).await;
    assert_eq!(filler.status, StatusCode::BAD_REQUEST);
    let message = flagged(
        "<p class=\"error\" data-status=\"400\">`prp\u{3164}` is not a proposal id",
        "`prp\\u{3164}` is not a proposal id",
    );
    assert!(filler.body.contains(&message), "{}", filler.body);
}

#[tokio::test]
async fn a_live_snapshot_shows_its_screenshot_and_warns_when_the_target_was_missing() {
    let host = Host::new();
    let app = host.router();
    let snapshot = |found| PageSnapshot {
        page: PageBinding {
            session_id: "ctx-1".into(),
            target_id: "tab-1".into(),
            page_revision: "loader-1".into(),
            element: None,
        },
        screenshot_png: Some(TINY_PNG.to_vec()),
        target_found: found,
    };
    let found = host.propose_observed(&click(), snapshot(true)).await;
    let missing = host.propose_observed(&click(), snapshot(false)).await;
    let page = get(&app, &proposal_path(&found), Some("alice")).await;
    assert!(page.body.contains(&format!(
        "<img class=\"screenshot\" src=\"/proposals/{}/screenshot.png\"",
        found.id
    )));
    assert!(page.body.contains(
        "session <code>ctx-1</code>, tab <code>tab-1</code>, document <code>loader-1</code>"
    ));
    assert!(
        page.body
            .contains("The outlined element is the one the selector matched.")
    );
    assert!(!page.body.contains("Target not found"));
    let warned = get(&app, &proposal_path(&missing), Some("alice")).await;
    assert!(
        warned
            .body
            .contains("role=\"alert\"><p><strong>Target not found.</strong>"),
        "{}",
        warned.body
    );

    // The grant approved from it is bound to the page.
    let token = form_token(&page.body, "/approve").unwrap();
    post(
        &app,
        &format!("{}/approve", proposal_path(&found)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}"),
    )
    .await;
    let stored = host.store.get_proposal(&found.id).await.unwrap().unwrap();
    let ProposalState::Approved { approval_id, .. } = stored.state else {
        panic!()
    };
    let grant = host
        .store
        .get(&approval_id)
        .await
        .unwrap()
        .unwrap()
        .approval;
    assert_eq!(grant.page(), Some(snapshot(true).page));
}

#[tokio::test]
async fn an_element_bound_snapshot_shows_what_the_target_is_and_the_grant_binds_it() {
    use countersign_approval_core::{ElementIdentity, FrameIdentity};
    let host = Host::new();
    let app = host.router();
    let element = ElementIdentity::new(
        "button",
        "Pay 120.00 EUR\u{202e}",
        "button",
        "Pay 120.00 EUR <b>now</b>",
        std::collections::BTreeMap::from([
            (
                "formaction".to_owned(),
                "https://shop.example/pay?to=\"a\"&x=1".to_owned(),
            ),
            ("type".to_owned(), "submit".to_owned()),
        ]),
        vec![
            FrameIdentity::new("https://docs.example.com", "loader-1"),
            FrameIdentity::new("https://pay.example", "loader-9"),
        ],
    )
    .unwrap();
    let snapshot = PageSnapshot {
        page: PageBinding::new("ctx-1", "tab-1", "loader-1").with_element(element),
        screenshot_png: Some(TINY_PNG.to_vec()),
        target_found: true,
    };
    let proposal = host.propose_observed(&click(), snapshot.clone()).await;
    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    for expected in [
        "<p id=\"element-summary\" class=\"text\">button &#34;Pay 120.00 EUR\u{202e}&#34; \
         (formaction https://shop.example/pay?to=&#34;a&#34;&#38;x=1, type submit)</p>",
        "<code id=\"element-role\">button</code>",
        "<span id=\"element-name\" class=\"text\">Pay 120.00 EUR\u{202e}</span>\
         <span class=\"hidden-chars\">Holds invisible characters: <code>Pay 120.00 EUR\\u{202e}</code></span>",
        "<code id=\"element-tag\">button</code>",
        "<span id=\"element-text\" class=\"text\">Pay 120.00 EUR &#60;b&#62;now&#60;/b&#62;</span>",
        "<tr><th scope=\"row\"><code>formaction</code></th><td><code class=\"element-attribute\">\
         https://shop.example/pay?to=&#34;a&#34;&#38;x=1</code></td></tr>",
        "<tr><th scope=\"row\">Main frame</th><td><code class=\"element-frame\">https://docs.example.com</code>, \
         document <code>loader-1</code></td></tr>",
        "<tr><th scope=\"row\">Frame 1</th><td><code class=\"element-frame\">https://pay.example</code>, \
         document <code>loader-9</code></td></tr>",
    ] {
        assert!(page.body.contains(expected), "{expected}\n{}", page.body);
    }
    assert!(!page.body.contains("<b>now"));

    // Approved, the grant binds the element exactly.
    let token = form_token(&page.body, "/approve").unwrap();
    post(
        &app,
        &format!("{}/approve", proposal_path(&proposal)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}"),
    )
    .await;
    let stored = host
        .store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap();
    let ProposalState::Approved { approval_id, .. } = stored.state else {
        panic!("not approved: {:?}", stored.state)
    };
    let grant = host.store.get(&approval_id).await.unwrap().unwrap();
    assert_eq!(grant.approval.page(), Some(snapshot.page));
}

#[tokio::test]
async fn a_submit_shows_what_will_be_submitted_and_never_a_password() {
    use countersign_approval_core::{ElementIdentity, FormField, FormSubmission, FrameIdentity};
    let host = Host::new();
    let app = host.router();
    let hash = "0123456789abcdef".repeat(4);
    let element = ElementIdentity::new(
        "button",
        "Pay",
        "button",
        "Pay",
        std::collections::BTreeMap::from([("type".to_owned(), "submit".to_owned())]),
        vec![FrameIdentity::new("https://docs.example.com", "loader-1")],
    )
    .unwrap()
    .with_submission(
        FormSubmission::new(vec![
            FormField::text("amount", "5 <b>EUR</b>"),
            FormField::text("to\u{202e}", "alice"),
            FormField::password("pin", hash.clone()),
            FormField::file("receipt", "a \"b\".pdf", 12),
            FormField::file("extra", "", 0),
        ])
        .unwrap(),
    );
    let snapshot = PageSnapshot {
        page: PageBinding::new("ctx-1", "tab-1", "loader-1").with_element(element),
        screenshot_png: Some(TINY_PNG.to_vec()),
        target_found: true,
    };
    let proposal = host.propose_observed(&click(), snapshot).await;
    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    for expected in [
        "<dt id=\"submission-heading\">What will be submitted",
        "<tr class=\"submitted-text\"><th scope=\"row\"><code>amount</code></th>\
         <td><code class=\"submitted-value\">5 &#60;b&#62;EUR&#60;/b&#62;</code></td></tr>",
        "<tr class=\"submitted-text\"><th scope=\"row\"><code>to\u{202e}</code>\
         <span class=\"hidden-chars\">Holds invisible characters: <code>to\\u{202e}</code></span></th>\
         <td><code class=\"submitted-value\">alice</code></td></tr>",
        "<tr class=\"submitted-password\"><th scope=\"row\"><code>pin</code></th>\
         <td><span class=\"hint\">a password: bound by a keyed hash of it, never shown or stored</span></td></tr>",
        "<tr class=\"submitted-file\"><th scope=\"row\"><code>receipt</code></th>\
         <td><code class=\"submitted-value\">a &#34;b&#34;.pdf</code> <span class=\"hint\">(file, 12 bytes)</span></td></tr>",
        "<tr class=\"submitted-file\"><th scope=\"row\"><code>extra</code></th>\
         <td><code class=\"submitted-value\"></code> <span class=\"hint\">(file, no file chosen)</span></td></tr>",
    ] {
        assert!(page.body.contains(expected), "{expected}\n{}", page.body);
    }
    assert!(
        !page.body.contains(&hash),
        "a password's hash is never shown"
    );
    assert!(!page.body.contains("<b>EUR"));
    assert_eq!(page.body.matches("<tr class=\"submitted-").count(), 5);

    // A target that submits nothing shows no such section.
    let plain = host.propose(&click()).await;
    let page = get(&app, &proposal_path(&plain), Some("alice")).await;
    assert!(!page.body.contains("What will be submitted"));
}

#[tokio::test]
async fn deny_expiry_and_stop_each_leave_act_refusing() {
    let host = Host::new();
    let app = host.router();
    let act = host.act();

    // Deny.
    let denied = host.propose(&click()).await;
    let page = get(&app, &proposal_path(&denied), Some("alice")).await;
    let deny = form_token(&page.body, "/deny").unwrap();
    let approve = form_token(&page.body, "/approve").unwrap();
    let answer = post(
        &app,
        &format!("{}/deny", proposal_path(&denied)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={deny}"),
    )
    .await;
    assert!(
        answer.headers[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("outcome=denied&")
    );
    let again = post(
        &app,
        &format!("{}/approve", proposal_path(&denied)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={approve}"),
    )
    .await;
    let shown = get(
        &app,
        again.headers[header::LOCATION].to_str().unwrap(),
        Some("alice"),
    )
    .await;
    assert!(
        shown.body.contains("Already denied, nothing changed"),
        "{}",
        shown.body
    );
    assert!(matches!(
        host.store
            .get_proposal(&denied.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ProposalState::Denied { .. }
    ));
    assert_eq!(host.store.len().unwrap(), 0);

    // Expiry.
    let expiring = host.propose(&click()).await;
    let page = get(&app, &proposal_path(&expiring), Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    host.clock.advance(support::PROPOSAL_TTL);
    let answer = post(
        &app,
        &format!("{}/approve", proposal_path(&expiring)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={approve}"),
    )
    .await;
    let shown = get(
        &app,
        answer.headers[header::LOCATION].to_str().unwrap(),
        Some("alice"),
    )
    .await;
    assert!(
        shown.body.contains("Expired, nothing changed"),
        "{}",
        shown.body
    );
    assert!(
        shown
            .body
            .contains("without a decision: it can no longer be approved")
    );
    assert_eq!(host.store.len().unwrap(), 0);

    // Stop: a grant approved before it stops working; approving after it is refused.
    let before = host.propose(&click()).await;
    let after = host
        .propose(&json!({"method": "click", "selector": "#later"}))
        .await;
    let page = get(&app, &proposal_path(&before), Some("alice")).await;
    let approve = form_token(&page.body, "/approve").unwrap();
    let later_page = get(&app, &proposal_path(&after), Some("alice")).await;
    let later_approve = form_token(&later_page.body, "/approve").unwrap();
    post(
        &app,
        &format!("{}/approve", proposal_path(&before)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={approve}"),
    )
    .await;
    let ProposalState::Approved { approval_id, .. } = host
        .store
        .get_proposal(&before.id)
        .await
        .unwrap()
        .unwrap()
        .state
    else {
        panic!()
    };

    let run = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run.body, "/stop").unwrap();
    let stopped = post(
        &app,
        &format!("{}/stop", run_path(&host)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={stop}"),
    )
    .await;
    assert_eq!(stopped.status, StatusCode::SEE_OTHER);
    let location = stopped.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!(
            "{}?stopped=1&standing=0&was=false&tag=",
            run_path(&host)
        )),
        "{location}"
    );
    let shown = get(&app, &location, Some("alice")).await;
    assert!(
        shown.body.contains("Run stopped: 1 grant stopped."),
        "{}",
        shown.body
    );
    let twice = post(
        &app,
        &format!("{}/stop", run_path(&host)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={stop}"),
    )
    .await;
    let shown = get(
        &app,
        twice.headers[header::LOCATION].to_str().unwrap(),
        Some("alice"),
    )
    .await;
    assert!(
        shown
            .body
            .contains("The run was already stopped, nothing changed: 0 grants stopped.")
    );

    let refused = post(
        &app,
        &format!("{}/approve", proposal_path(&after)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={later_approve}"),
    )
    .await;
    let shown = get(
        &app,
        refused.headers[header::LOCATION].to_str().unwrap(),
        Some("alice"),
    )
    .await;
    assert!(
        shown
            .body
            .contains("The run is stopped, nothing changed: no grant was issued."),
        "{}",
        shown.body
    );
    let fresh = get(&app, &proposal_path(&after), Some("alice")).await;
    assert!(
        fresh
            .body
            .contains("Pending, but its run is stopped: it can no longer be approved.")
    );
    assert!(!fresh.body.contains("id=\"approve\""));
    assert_eq!(
        host.store.len().unwrap(),
        1,
        "only the grant approved before the stop"
    );

    let stale = act
        .execute_json(&Host::act_call(&click(), approval_id.as_str()))
        .await;
    assert_eq!(stale["error"]["code"], "APPROVAL_STALE", "{stale}");
    for proposal in [&denied, &expiring, &after] {
        let call = Host::act_call(&click(), proposal.id.as_str());
        assert_eq!(
            act.execute_json(&call).await["error"]["code"],
            "APPROVAL_REQUIRED"
        );
    }
    assert_eq!(host.backend.len(), 0);
}

#[tokio::test]
async fn runs_another_approver_may_not_review_are_403() {
    let host = Host::for_run("actor-1", OFF_LIMITS_RUN);
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let run = get(&app, &run_path(&host), Some("alice")).await;
    assert_eq!(run.status, StatusCode::FORBIDDEN);
    assert!(
        run.body
            .contains("you may not review run `off-limits` of actor `actor-1`"),
        "{}",
        run.body
    );
    // A proposal's page, screenshot and decisions name nothing of it: not
    // its run, its actor or its action (nothing of a run is shown before
    // `may_review` allows it).
    let base = proposal_path(&proposal);
    let approve = form_token(&get(&app, &base, Some("alice")).await.body, "/approve");
    assert_eq!(approve, None, "no form is shown");
    for answer in [
        get(&app, &base, Some("alice")).await,
        get(&app, &format!("{base}/screenshot.png"), Some("alice")).await,
    ] {
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        assert_eq!(answer.body, PROPOSAL_FORBIDDEN);
    }
    assert_pending_without_grant(&host, &proposal).await;
}

/// The whole page refusing a proposal of a run its viewer may not review.
const PROPOSAL_FORBIDDEN: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Not allowed · countersign approvals</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n</head>\n<body>\n<a class=\"skip\" href=\"#main\">Skip to the content</a>\n<header class=\"site\">\n<p class=\"brand\">countersign approvals</p>\n<p class=\"who\">Signed in as <strong>alice</strong></p>\n</header>\n<main id=\"main\">\n\n<h1>Not allowed</h1>\n<p class=\"error\" data-status=\"403\">you may not review this proposal</p>\n\n</main>\n</body>\n</html>";

/// Another instance of the pages over `host`'s store and clock, with
/// `approvers` and the form key `key`.
fn pages_with_key(
    host: &Host,
    approvers: impl Approvers + 'static,
    key: [u8; countersign_approval_web::FORM_KEY_BYTES],
) -> Router {
    ApprovalPages::builder(host.store.clone(), approvers)
        .clock(host.clock.clone())
        .form_key(key)
        .build()
        .unwrap()
        .router()
}

/// The tests' authentication, letting everyone review every run.
struct EveryRun;

#[countersign_approval_web::async_trait]
impl Approvers for EveryRun {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        CookieApprovers.approver(request).await
    }
}

#[tokio::test]
async fn a_decision_on_a_proposal_of_a_run_not_theirs_is_403_and_names_nothing_of_it() {
    let host = Host::for_run("actor-1", OFF_LIMITS_RUN);
    let key = [7u8; countersign_approval_web::FORM_KEY_BYTES];
    let open = pages_with_key(&host, EveryRun, key);
    let restricted = pages_with_key(&host, CookieApprovers, key);
    let proposal = host.propose(&click()).await;
    // Alice holds valid forms (from pages that let her see the run); the
    // pages that may not show her the run refuse them without a word of it.
    let page = get(&open, &proposal_path(&proposal), Some("alice")).await;
    for (what, suffix) in [("approve", "/approve"), ("deny", "/deny")] {
        let token = form_token(&page.body, suffix).unwrap();
        let refused = post(
            &restricted,
            &format!("{}{suffix}", proposal_path(&proposal)),
            Some("alice"),
            From::SameOrigin,
            &format!("token={token}"),
        )
        .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{what}");
        assert_eq!(refused.body, PROPOSAL_FORBIDDEN, "{what}");
    }
    assert_pending_without_grant(&host, &proposal).await;
}

#[tokio::test]
async fn nested_pages_link_and_redirect_under_their_mount_point() {
    let host = Host::new();
    let app = Router::new().nest("/approvals", host.router());
    let proposal = host.propose(&click()).await;
    let base = format!("/approvals{}", proposal_path(&proposal));
    let page = get(&app, &base, Some("alice")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("href=\"/approvals/style.css\""));
    assert!(page.body.contains(&format!("action=\"{base}/approve\"")));
    assert!(page.body.contains("href=\"/approvals/runs/actor-1/run-1\""));
    let token = form_token(&page.body, "/approve").unwrap();
    let answer = post(
        &app,
        &format!("{base}/approve"),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}"),
    )
    .await;
    assert!(
        answer.headers[header::LOCATION]
            .to_str()
            .unwrap()
            .starts_with(&format!("{base}?outcome=approved"))
    );
    let style = get(&app, "/approvals/style.css", None).await;
    assert_eq!(style.status, StatusCode::OK);
}

#[tokio::test]
async fn ids_with_slashes_and_spaces_round_trip_through_the_path() {
    let host = Host::for_run("team/a b", "run #1?x=%");
    let app = host.router();
    let proposal = host.propose(&click()).await;
    let path = run_path(&host);
    assert_eq!(path, "/runs/team%2Fa%20b/run%20%231%3Fx%3D%25");
    let run = get(&app, &path, Some("alice")).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    assert!(run.body.contains(proposal.id.as_str()));
    assert!(run.body.contains("<code id=\"actor\">team/a b</code></dd>"));
    assert!(
        run.body
            .contains("<title>Run run #1?x=% · countersign approvals</title>")
    );
    let stop = form_token(&run.body, "/stop").unwrap();
    let stopped = post(
        &app,
        &format!("{path}/stop"),
        Some("alice"),
        From::SameOrigin,
        &format!("token={stop}"),
    )
    .await;
    assert!(
        stopped.headers[header::LOCATION]
            .to_str()
            .unwrap()
            .starts_with(&format!("{path}?stopped=0&standing=0&was=false"))
    );
}

#[test]
fn the_grant_lifetime_is_checked() {
    let build = |ttl| {
        ApprovalPages::builder(
            countersign_store_memory::InMemoryApprovalStore::new(),
            CookieApprovers,
        )
        .grant_ttl(ttl)
        .build()
    };
    assert_eq!(
        build(Duration::ZERO).unwrap_err(),
        ApprovalPagesError::InvalidGrantTtl { millis: 0 }
    );
    let day_and_a_bit = Duration::from_secs(24 * 3600 + 1);
    let error = build(day_and_a_bit).unwrap_err();
    assert_eq!(
        error.to_string(),
        "grant ttl must be more than 0 and at most 24 hours, got 86401000ms"
    );
    assert_eq!(
        build(Duration::from_secs(24 * 3600)).unwrap().grant_ttl(),
        Duration::from_secs(86_400)
    );
    let default = ApprovalPages::builder(
        countersign_store_memory::InMemoryApprovalStore::new(),
        CookieApprovers,
    )
    .build()
    .unwrap();
    assert_eq!(default.grant_ttl(), Duration::from_secs(300));
}

#[tokio::test]
async fn a_shared_form_key_lets_two_instances_take_each_others_forms() {
    let host = Host::new();
    let key = [42u8; countersign_approval_web::FORM_KEY_BYTES];
    let one = pages_with_key(&host, CookieApprovers, key);
    let two = pages_with_key(&host, CookieApprovers, key);
    let three = host.router();
    let proposal = host.propose(&click()).await;
    let page = get(&one, &proposal_path(&proposal), Some("alice")).await;
    let token = form_token(&page.body, "/approve").unwrap();
    let refused = post(
        &three,
        &format!("{}/approve", proposal_path(&proposal)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}"),
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::FORBIDDEN,
        "another key refuses it"
    );
    let taken = post(
        &two,
        &format!("{}/approve", proposal_path(&proposal)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}"),
    )
    .await;
    assert_eq!(taken.status, StatusCode::SEE_OTHER);
    assert!(matches!(
        host.store
            .get_proposal(&proposal.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ProposalState::Approved { .. }
    ));
}

#[tokio::test]
async fn a_person_named_like_a_rule_may_not_decide() {
    let host = Host::new();
    let app = host.router();
    let proposal = host.propose(&click()).await;
    for impostor in [Some("rule:default.pays"), Some("standing:stg_0")] {
        for answer in [
            get(&app, &run_path(&host), impostor).await,
            get(&app, &proposal_path(&proposal), impostor).await,
            post(
                &app,
                &format!("{}/approve", proposal_path(&proposal)),
                impostor,
                From::SameOrigin,
                "token=x",
            )
            .await,
        ] {
            assert_eq!(answer.status, StatusCode::FORBIDDEN);
            assert!(
            answer.body.contains(
                "approver ids that start with `rule:` or `standing:` are kept for rules and standing grants; the host must name people otherwise"
            ),
            "{}",
            answer.body
        );
        }
    }
    assert_pending_without_grant(&host, &proposal).await;
}

/// A proposal whose snapshot bound the pay button: what a standing
/// approval needs.
async fn propose_bound(host: &Host) -> Proposal {
    let element = countersign_approval_core::ElementIdentity::new(
        "button",
        "Pay the invoice",
        "button",
        "Pay the invoice",
        std::collections::BTreeMap::new(),
        vec![countersign_approval_core::FrameIdentity::new(
            "https://docs.example.com",
            "loader-1",
        )],
    )
    .unwrap();
    let snapshot = PageSnapshot {
        page: PageBinding::new("ctx-1", "tab-1", "loader-1").with_element(element),
        screenshot_png: None,
        target_found: true,
    };
    host.propose_observed(&click(), snapshot).await
}

#[tokio::test]
async fn approve_up_to_n_times_says_its_scope_and_issues_a_standing_grant() {
    let host = Host::new();
    let app = host.router();
    let proposal = propose_bound(&host).await;
    let page = get(&app, &proposal_path(&proposal), Some("alice")).await;
    assert!(
        page.body.contains(
            "<span id=\"standing-covers\" class=\"text\">`click` on the button named \u{201c}Pay the invoice\u{201d}, on pages of https://docs.example.com/account (port 443, any query), in this run only</span>"
        ),
        "{}",
        page.body
    );
    assert!(page.body.contains("<span id=\"standing-not-covered\">any other element, name, method, path, scheme, port or host; another run or actor; anything after the uses are spent, the time is up or the run is stopped</span>"));
    // A proposal that bound no element is offered no standing approval.
    let plain = host.propose(&click()).await;
    let plain_page = get(&app, &proposal_path(&plain), Some("alice")).await;
    assert!(plain_page.body.contains("id=\"approve\""));
    assert!(!plain_page.body.contains("approve-standing"));

    let action = format!("{}/approve-standing", proposal_path(&proposal));
    let token = form_token(&page.body, "/approve-standing").unwrap();
    // Out-of-bounds uses and hours are refused; nothing changes.
    for bad in [
        "uses=0&hours=1",
        "uses=101&hours=1",
        "uses=3.5&hours=1",
        "uses=3&hours=9",
        "uses=3&hours=",
    ] {
        let answer = post(
            &app,
            &action,
            Some("alice"),
            From::SameOrigin,
            &format!("token={token}&{bad}"),
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    // Another form's token, or another approver, is refused.
    let approve_token = form_token(&page.body, "/approve\"").unwrap_or_default();
    for (who, token) in [("alice", approve_token.as_str()), ("bob", token.as_str())] {
        let answer = post(
            &app,
            &action,
            Some(who),
            From::SameOrigin,
            &format!("token={token}&uses=3&hours=1"),
        )
        .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{who}");
    }
    // Cross-site: refused before any handler.
    let answer = post(
        &app,
        &action,
        Some("alice"),
        From::CrossSite,
        &format!("token={token}&uses=3&hours=1"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(
        host.store
            .standing_grants(&host.actor, &host.run, host.clock_now())
            .await
            .unwrap()
            .is_empty()
    );

    let answer = post(
        &app,
        &action,
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}&uses=3&hours=2"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let location = answer.headers[header::LOCATION].to_str().unwrap();
    assert!(location.contains("outcome=approved-standing"), "{location}");
    let standing = host
        .store
        .standing_grants(&host.actor, &host.run, host.clock_now())
        .await
        .unwrap();
    assert_eq!(standing.len(), 1);
    let grant = &standing[0].grant;
    assert_eq!((grant.uses, grant.approver.id.as_str()), (3, "alice"));
    assert_eq!(
        grant.expires_at.as_millis() - grant.issued_at.as_millis(),
        2 * 3600 * 1000
    );
    // The proposal itself is approved by the standing grant: its act
    // takes the first use.
    let stored = host
        .store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap();
    let ProposalState::Approved { by, .. } = stored.state else {
        panic!("{:?}", stored.state)
    };
    assert_eq!(
        by.unwrap().as_str(),
        format!("standing:{}", grant.id).as_str()
    );
    let shown = get(&app, location, Some("alice")).await;
    assert!(shown.body.contains("Approved with a standing approval"));
}

/// A bound proposal of `host`, approved by alice on its page "up to 5
/// times" for an hour.
async fn approve_five_times_from_the_page(host: &Host, app: &Router) {
    let proposal = propose_bound(host).await;
    let page = get(app, &proposal_path(&proposal), Some("alice")).await;
    let token = form_token(&page.body, "/approve-standing").unwrap();
    post(
        app,
        &format!("{}/approve-standing", proposal_path(&proposal)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}&uses=5&hours=1"),
    )
    .await;
}

#[tokio::test]
async fn the_run_page_lists_standing_grants_and_revokes_one_with_its_token() {
    let host = Host::new();
    let app = host.router();
    approve_five_times_from_the_page(&host, &app).await;
    let id = host
        .store
        .standing_grants(&host.actor, &host.run, host.clock_now())
        .await
        .unwrap()[0]
        .grant
        .id
        .clone();
    let run_page = get(&app, &run_path(&host), Some("alice")).await;
    assert!(
        run_page
            .body
            .contains("<span class=\"uses-left\">5</span> of 5"),
        "{}",
        run_page.body
    );
    assert!(run_page.body.contains(&format!("Revoke <code>{id}</code>")));
    let revoke = format!("{}/revoke", run_path(&host));
    let token = form_token(&run_page.body, "/revoke").unwrap();
    // The token is for this grant only; another id or approver is refused.
    let other = countersign_approval_core::StandingId::generate().unwrap();
    for (who, form) in [
        ("alice", format!("token={token}&standing={other}")),
        ("bob", format!("token={token}&standing={id}")),
        ("alice", format!("token=00&standing={id}")),
    ] {
        let answer = post(&app, &revoke, Some(who), From::SameOrigin, &form).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{who} {form}");
    }
    let answer = post(
        &app,
        &revoke,
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}&standing={id}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let stored = host.store.get_standing(&id).await.unwrap().unwrap();
    assert_eq!(
        stored.state,
        countersign_approval_core::StandingState::Revoked
    );
    let after = get(&app, &run_path(&host), Some("alice")).await;
    assert!(
        after
            .body
            .contains("No standing approval of this run is active.")
    );
}

/// Stop run counts what it ends: the grant the person's "up to N times"
/// approved, and the standing approval itself, each said on the page.
#[tokio::test]
async fn stopping_a_run_says_how_many_standing_approvals_it_ended() {
    let host = Host::new();
    let app = host.router();
    approve_five_times_from_the_page(&host, &app).await;
    let run_page = get(&app, &run_path(&host), Some("alice")).await;
    let stop = form_token(&run_page.body, "/stop").unwrap();
    let stopped = post(
        &app,
        &format!("{}/stop", run_path(&host)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={stop}"),
    )
    .await;
    let location = stopped.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!(
            "{}?stopped=1&standing=1&was=false&tag=",
            run_path(&host)
        )),
        "{location}"
    );
    let shown = get(&app, &location, Some("alice")).await;
    assert!(
        shown
            .body
            .contains("Run stopped: 1 grant and 1 standing approval stopped."),
        "{}",
        shown.body
    );
    // The count is signed with the rest: another count is not shown.
    let forged = location.replace("standing=1", "standing=0");
    let shown = get(&app, &forged, Some("alice")).await;
    assert!(!shown.body.contains("Run stopped:"), "{}", shown.body);
}

/// The token the pages under `key` sign `fields` with: HMAC-SHA256 of the
/// length-prefixed fields, in hex (what `forms.rs` documents).
fn token_under(key: &[u8; 32], fields: &[&str]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    for field in fields {
        mac.update(&(field.len() as u64).to_be_bytes());
        mac.update(field.as_bytes());
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_standing_grant_of_another_run_is_not_revoked_from_this_one() {
    let key = [9u8; 32];
    let host = Host::new();
    let proposal = propose_bound(&Host::for_run("actor-1", "run-2")).await;
    host.store.propose(proposal.clone()).await.unwrap();
    let approver = Approver {
        id: ApproverId::new("alice").unwrap(),
        approved_at: host.clock_now(),
    };
    let approved = countersign_approval_core::approve_standing(
        host.store.as_ref(),
        &proposal.id,
        3,
        Duration::from_secs(3600),
        DEFAULT_GRANT_TTL,
        approver,
        host.clock_now(),
    )
    .await
    .unwrap();
    let id = approved.standing.unwrap().id;
    let app = ApprovalPages::builder(host.store.clone(), CookieApprovers)
        .clock(host.clock.clone())
        .form_key(key)
        .build()
        .unwrap()
        .router();
    let run_page = get(&app, &run_path(&host), Some("alice")).await;
    assert!(!run_page.body.contains(id.as_str()));
    // The check of the token is sound (a token this run's page would
    // sign for that id) and still the grant of run-2 is not revoked
    // from run-1's page.
    let token = token_under(
        &key,
        &["revoke-standing", "alice", "actor-1", "run-1", id.as_str()],
    );
    let answer = post(
        &app,
        &format!("{}/revoke", run_path(&host)),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}&standing={id}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert_eq!(
        host.store.get_standing(&id).await.unwrap().unwrap().state,
        countersign_approval_core::StandingState::Active
    );
    // The same token on run-2's page is for another run: refused.
    let answer = post(
        &app,
        &format!(
            "{}/revoke",
            ApprovalPages::run_path(&host.actor, &RunId::new("run-2").unwrap())
        ),
        Some("alice"),
        From::SameOrigin,
        &format!("token={token}&standing={id}"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
}
