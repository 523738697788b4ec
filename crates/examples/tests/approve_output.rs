//! The approve example without a person: the program presses Approve
//! through the page, the model learns the decision and acts exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../examples/approve.rs"]
mod approve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_approval_lets_the_model_act_once() {
    let announced = std::sync::Mutex::new(Vec::new());
    let lines = approve::scenario(true, |line| announced.lock().unwrap().push(line.to_owned()))
        .await
        .unwrap();
    assert_eq!(
        lines,
        [
            "browser_propose: pending",
            "browser_proposal_status: approved",
            "browser_act: ok",
            "browser_act again: APPROVAL_STALE",
            "approved by: demo-approver",
            "clicks performed: 1",
        ]
    );
    let announced = announced.into_inner().unwrap();
    assert_eq!(announced.len(), 1);
    assert!(
        announced[0].starts_with("open http://127.0.0.1:"),
        "{}",
        announced[0]
    );
    assert!(announced[0].contains("/sign-in/"), "{}", announced[0]);
}
