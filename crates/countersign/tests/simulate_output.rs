//! The simulation example prints every outcome of the walkthrough.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../examples/simulate.rs"]
mod simulate;

#[tokio::test]
async fn the_simulation_shows_each_outcome() {
    let lines = simulate::scenario().await.unwrap();
    assert_eq!(lines[0], "ok");
    let id = &lines[1];
    assert!(
        id.len() == 36 && id.starts_with("apr_") && id[4..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(
        lines[2..],
        [
            "replay: APPROVAL_STALE",
            "unknown id: APPROVAL_REQUIRED",
            "another host: NOT_AUTHORIZED",
            "revoked: APPROVAL_STALE",
            "expired: APPROVAL_STALE",
            "fake backend records: 1",
            "operation records: 6",
        ]
    );
}
