//! The live example, in real headless Chromium: the click reaches the page
//! once, a replay and a reload are refused, the reloaded page is untouched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../examples/live.rs"]
mod live;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_walkthrough_shows_each_outcome() {
    let lines = live::scenario().await.unwrap();
    assert_eq!(
        lines,
        [
            "clicks on the page: 0",
            "click: ok",
            "clicks on the page: 1",
            "replay: APPROVAL_STALE",
            "after a reload: APPROVAL_STALE",
            "that approval still unused: true",
            "clicks on the reloaded page: 0",
        ]
    );
}
