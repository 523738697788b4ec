#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Standing grants never widen: a scope covers exactly its five facts in
//! one actor's run, and over any sequence of uses, retries and give-backs
//! no more than N attempts hold a use, and a given-back attempt never
//! takes one again.
//!
//! 300 cases each in CI's debug build; `COUNTERSIGN_STANDING_CASES=100000`
//! with `--release` for the full run (figures in docs/security-model.md).

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, Approver, ApproverId, AttemptId, StaleReason, StandingGrant,
    StandingKey, StandingScope, StoredStanding, Timestamp, UseOutcome, decide_give_back,
    decide_use,
};
use proptest::prelude::*;

/// Origins as a URL writes them, with the scheme, host and effective port
/// each one means: a default port written out or left out is the same
/// origin; another scheme or port is not.
const ORIGINS: [(&str, (&str, &str, u16)); 9] = [
    (
        "https://shop.example.com",
        ("https", "shop.example.com", 443),
    ),
    (
        "https://shop.example.com:443",
        ("https", "shop.example.com", 443),
    ),
    ("http://shop.example.com", ("http", "shop.example.com", 80)),
    (
        "http://shop.example.com:80",
        ("http", "shop.example.com", 80),
    ),
    (
        "http://shop.example.com:443",
        ("http", "shop.example.com", 443),
    ),
    (
        "https://shop.example.com:80",
        ("https", "shop.example.com", 80),
    ),
    (
        "https://shop.example.com:8443",
        ("https", "shop.example.com", 8443),
    ),
    (
        "https://SHOP.example.com.",
        ("https", "shop.example.com.", 443),
    ),
    ("https://evil.example", ("https", "evil.example", 443)),
];
const PATHS: [&str; 3] = ["/results", "/results/", "/results/admin"];
const QUERIES: [&str; 3] = ["", "?page=2", "?page=2#top"];
const METHODS: [&str; 2] = ["click", "type"];
const ROLES: [&str; 2] = ["button", "link"];
const NAMES: [&str; 3] = ["Next page", "Next page ", "Pay now"];

/// One proposed action's facts, as indices into the tables above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts {
    host: usize,
    path: usize,
    query: usize,
    method: usize,
    role: usize,
    name: usize,
    run: usize,
    actor: usize,
}

fn arb_facts() -> impl Strategy<Value = Facts> {
    (
        (0..ORIGINS.len(), 0..3usize, 0..3usize, 0..2usize),
        (0..2usize, 0..3usize, 0..2usize, 0..2usize),
    )
        .prop_map(
            |((host, path, query, method), (role, name, run, actor))| Facts {
                host,
                path,
                query,
                method,
                role,
                name,
                run,
                actor,
            },
        )
}

fn scope(f: Facts) -> StandingScope {
    let url = format!("{}{}{}", ORIGINS[f.host].0, PATHS[f.path], QUERIES[f.query]);
    StandingScope::from_facts(&url, METHODS[f.method], ROLES[f.role], NAMES[f.name]).unwrap()
}

fn key(f: Facts) -> StandingKey {
    StandingKey {
        actor_id: ActorId::new(format!("actor-{}", f.actor)).unwrap(),
        run_id: countersign_approval_core::RunId::new(format!("run-{}", f.run)).unwrap(),
        scope: scope(f),
    }
}

/// The words a person reads name the real scheme, and the port: left out
/// of the URL where it is the scheme's default, written out otherwise.
#[test]
fn a_scope_says_its_scheme_and_port() {
    let words = |url: &str| {
        StandingScope::from_facts(url, "click", "button", "Next")
            .unwrap()
            .describe()
            .0
    };
    assert_eq!(
        words("http://shop.example.com/results?page=2"),
        "`click` on the button named \u{201c}Next\u{201d}, on pages of http://shop.example.com/results (port 80, any query), in this run only"
    );
    assert_eq!(
        words("https://shop.example.com:443/results"),
        "`click` on the button named \u{201c}Next\u{201d}, on pages of https://shop.example.com/results (port 443, any query), in this run only"
    );
    assert_eq!(
        words("https://[::1]:8443/"),
        "`click` on the button named \u{201c}Next\u{201d}, on pages of https://[::1]:8443/ (port 8443, any query), in this run only"
    );
    let scope =
        StandingScope::from_facts("https://[::1]:8443/", "click", "button", "Next").unwrap();
    assert_eq!(
        scope.as_str(),
        r#"{"v":2,"scheme":"https","host":"[::1]","port":8443,"method":"click","path":"/","role":"button","name":"Next"}"#
    );
    assert_eq!(StandingScope::parse(scope.as_str()), Some(scope));
    assert_eq!(
        StandingScope::from_facts("foo://shop.example.com/", "click", "button", "Next")
            .unwrap_err()
            .to_string(),
        "standing grants cover pages at a known port; `foo://shop.example.com/` names none"
    );
}

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn standing(f: Facts, uses: u32) -> StoredStanding {
    let k = key(f);
    let approver = Approver {
        id: ApproverId::new("carol").unwrap(),
        approved_at: T0,
    };
    let grant = StandingGrant::new(
        k.actor_id,
        k.run_id,
        &scope(f),
        uses,
        Duration::from_secs(3600),
        T0,
        approver,
    )
    .unwrap()
    .with_attempt_limit(100)
    .unwrap();
    StoredStanding::issued(grant)
}

/// One step of a sequence against one standing grant.
#[derive(Debug, Clone)]
enum Step {
    /// Attempt `n` uses with the grant's own key.
    Use(usize),
    /// Attempt `n` uses with another action's facts.
    UseOther(usize, Facts),
    /// Attempt `n` gives its use back.
    GiveBack(usize),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..12usize).prop_map(Step::Use),
        1 => ((0..12usize), arb_facts()).prop_map(|(n, f)| Step::UseOther(n, f)),
        2 => (0..12usize).prop_map(Step::GiveBack),
    ]
}

fn cases() -> u32 {
    std::env::var("COUNTERSIGN_STANDING_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Two actions share a scope exactly when scheme, host, effective
    /// port, path, method, role and accessible name are equal; the query
    /// and fragment never matter, nor whether a default port is written
    /// out. A use authorises only its own actor, run and scope.
    #[test]
    fn a_scope_covers_exactly_its_facts(a in arb_facts(), b in arb_facts()) {
        let (scheme, host, port) = ORIGINS[a.host].1;
        let own = scope(a);
        prop_assert_eq!((own.scheme(), own.host(), own.port()), (scheme, host, port));
        let same_scope = ORIGINS[a.host].1 == ORIGINS[b.host].1
            && PATHS[a.path] == PATHS[b.path]
            && a.method == b.method
            && a.role == b.role
            && NAMES[a.name] == NAMES[b.name];
        prop_assert_eq!(scope(a) == scope(b), same_scope);
        prop_assert_eq!(StandingScope::parse(scope(a).as_str()), Some(scope(a)));
        let grant = standing(a, 3);
        let attempt = AttemptId::generate().unwrap();
        let used = decide_use(&grant, &[], false, &key(b), T0, &attempt);
        let covers = same_scope && a.run == b.run && a.actor == b.actor;
        prop_assert_eq!(matches!(used.outcome, UseOutcome::Used { .. }), covers);
        prop_assert_eq!(used.record_use, covers);
    }

    /// Over any sequence of uses, retries, uses of other actions and
    /// give-backs, applied as a store applies the decisions: at most N
    /// attempts hold a use, each answered `Used` exactly while it holds
    /// one, and an attempt that gave back a use never takes one again. A
    /// give-back by an attempt that holds no use changes nothing at all,
    /// so no number of them revokes the grant.
    #[test]
    fn n_uses_authorise_at_most_n_over_any_sequence(
        facts in arb_facts(),
        uses in 1u32..6,
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let attempts: Vec<AttemptId> = (0..12).map(|_| AttemptId::generate().unwrap()).collect();
        let mut stored = standing(facts, uses);
        let mut abandoned: Vec<AttemptId> = Vec::new();
        let own = key(facts);
        let mut first_uses = 0u32;
        let mut give_backs = 0u32;
        for step in steps {
            match step {
                Step::Use(n) | Step::UseOther(n, _) => {
                    let presented = match step {
                        Step::UseOther(_, other) => key(other),
                        _ => own.clone(),
                    };
                    let attempt = &attempts[n];
                    let held = stored.used_by.contains(attempt);
                    let d = decide_use(&stored, &abandoned, false, &presented, T0, attempt);
                    if abandoned.contains(attempt) {
                        prop_assert_eq!(d.outcome, UseOutcome::Stale(StaleReason::Abandoned));
                    }
                    if presented != own {
                        prop_assert!(!matches!(d.outcome, UseOutcome::Used { .. }), "{:?}", d);
                    }
                    match d.outcome {
                        UseOutcome::Used { replay, remaining } => {
                            prop_assert_eq!(replay, held);
                            let after = stored.used_by.len() + usize::from(d.record_use);
                            prop_assert_eq!(remaining as usize, uses as usize - after);
                            if !replay {
                                first_uses += 1;
                            }
                        }
                        UseOutcome::Stale(StaleReason::Consumed) => {
                            prop_assert_eq!(stored.remaining(), 0);
                        }
                        _ => prop_assert!(!d.record_use),
                    }
                    if d.record_use {
                        stored.used_by.push(attempt.clone());
                    }
                    if let Some(failed) = d.failed_attempts {
                        stored.failed_attempts = failed;
                    }
                    if let Some(state) = d.state {
                        stored.state = state;
                    }
                }
                Step::GiveBack(n) => {
                    let attempt = &attempts[n];
                    let held = stored.used_by.contains(attempt);
                    let d = decide_give_back(&stored, &abandoned, false, T0, attempt);
                    if !held {
                        prop_assert!(!d.release_use && !d.remember && d.state.is_none(), "{:?}", d);
                    }
                    if let AbandonOutcome::Usable { restored: true } = d.outcome {
                        give_backs += 1;
                    }
                    if d.release_use {
                        stored.used_by.retain(|a| a != attempt);
                    }
                    if d.remember {
                        abandoned.push(attempt.clone());
                    }
                    if let Some(state) = d.state {
                        stored.state = state;
                    }
                }
            }
            prop_assert!(stored.used_by.len() <= uses as usize);
            prop_assert!(stored.used_by.iter().all(|a| !abandoned.contains(a)));
            prop_assert_eq!(first_uses - give_backs, stored.used_by.len() as u32);
        }
    }
}

/// One step against a once-approval: attempt `n` consumes with the grant's
/// binding or another, or gives its consume back.
#[derive(Debug, Clone)]
enum OnceStep {
    Consume(usize, bool),
    Abandon(usize),
}

fn arb_once_step() -> impl Strategy<Value = OnceStep> {
    prop_oneof![
        4 => ((0..8usize), any::<bool>()).prop_map(|(n, own)| OnceStep::Consume(n, own)),
        1 => (0..8usize).prop_map(OnceStep::Abandon),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// A once-approval authorises exactly one act: over any sequence of
    /// consumes (with its binding or another), retries and give-backs,
    /// applied as a store applies the decisions, at most one attempt
    /// holds the grant at any time, a consume with another binding never
    /// does, and an attempt given back never consumes again.
    #[test]
    fn a_once_approval_authorises_exactly_one_act(
        steps in proptest::collection::vec(arb_once_step(), 1..40),
    ) {
        use countersign_approval_core::{
            Approval, Binding, ConsumeOutcome, GrantState, StoredGrant, decide_abandon,
            decide_consume, policy::{Policy, StaticResolver},
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let policy = Policy::builder()
            .allow_host("shop.example.com")
            .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
            .build()
            .unwrap();
        let url = runtime
            .block_on(policy.authorize_destination("https://shop.example.com/pay"))
            .unwrap();
        let pay = policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": "#pay"}))
            .unwrap();
        let other = policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": "#pay-more"}))
            .unwrap();
        let (actor, run) = (ActorId::new("actor").unwrap(), countersign_approval_core::RunId::new("run").unwrap());
        let approval = Approval::for_action(actor.clone(), run.clone(), &url, &pay, Duration::from_secs(60), T0)
            .unwrap()
            .with_attempt_limit(100)
            .unwrap();
        let own = Binding::new(&actor, &run, &url, &pay);
        let wrong = Binding::new(&actor, &run, &url, &other);
        let attempts: Vec<AttemptId> = (0..8).map(|_| AttemptId::generate().unwrap()).collect();
        let mut grant = StoredGrant::issued(approval);
        let mut abandoned: Vec<AttemptId> = Vec::new();
        // The attempts that were told to act and never gave it back.
        let mut acted: Vec<AttemptId> = Vec::new();
        for step in steps {
            match step {
                OnceStep::Consume(n, own_binding) => {
                    let binding = if own_binding { &own } else { &wrong };
                    let d = decide_consume(&grant, &abandoned, false, binding, T0, &attempts[n]);
                    if let ConsumeOutcome::Consumed { replay } = d.outcome {
                        prop_assert!(own_binding);
                        prop_assert!(!abandoned.contains(&attempts[n]));
                        prop_assert_eq!(replay, acted.contains(&attempts[n]));
                        if !replay {
                            acted.push(attempts[n].clone());
                        }
                    }
                    if let Some(state) = d.state {
                        grant.state = state;
                    }
                    if let Some(failed) = d.failed_attempts {
                        grant.failed_attempts = failed;
                    }
                }
                OnceStep::Abandon(n) => {
                    let d = decide_abandon(&grant, &abandoned, false, T0, &attempts[n]);
                    // A consume undone (the state moves back to active).
                    if matches!(d.outcome, AbandonOutcome::Usable { restored: true } | AbandonOutcome::Expired)
                        && d.state.is_some()
                    {
                        acted.retain(|a| a != &attempts[n]);
                    }
                    if let Some(state) = d.state {
                        grant.state = state;
                    }
                    if d.remember {
                        abandoned.push(attempts[n].clone());
                    }
                }
            }
            // One holder at most, and never a given-back attempt.
            if let GrantState::Consumed { by, .. } = &grant.state {
                prop_assert!(!abandoned.contains(by));
            }
            let holders = attempts
                .iter()
                .filter(|a| matches!(&grant.state, GrantState::Consumed { by, .. } if by == *a))
                .count();
            prop_assert!(holders <= 1);
            prop_assert!(acted.len() <= 1, "{} attempts acted: {:?}", acted.len(), acted);
        }
    }
}
