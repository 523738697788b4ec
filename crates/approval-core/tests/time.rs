#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Timestamps and clocks.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use countersign_approval_core::{Clock, ManualClock, SystemClock, Timestamp};

#[test]
fn timestamp_arithmetic() {
    let t = Timestamp::from_millis(1_000);
    assert_eq!(t.as_millis(), 1_000);
    assert_eq!(
        t.checked_add(Duration::from_millis(1)),
        Some(Timestamp::from_millis(1_001))
    );
    assert_eq!(
        t.checked_add(Duration::from_secs(1)),
        Some(Timestamp::from_millis(2_000))
    );
    // Sub-millisecond parts are dropped.
    assert_eq!(
        t.checked_add(Duration::from_micros(1_999)),
        Some(Timestamp::from_millis(1_001))
    );
    assert_eq!(t.checked_add(Duration::ZERO), Some(t));

    let max = Timestamp::from_millis(u64::MAX);
    assert_eq!(max.checked_add(Duration::from_millis(1)), None);
    assert_eq!(t.checked_add(Duration::MAX), None);
    assert_eq!(max.saturating_add(Duration::from_secs(1)), max);
    assert_eq!(t.saturating_add(Duration::MAX), max);
    assert_eq!(
        t.saturating_add(Duration::from_millis(5)),
        Timestamp::from_millis(1_005)
    );

    assert_eq!(
        t.saturating_sub(Duration::from_millis(1)),
        Timestamp::from_millis(999)
    );
    assert_eq!(
        t.saturating_sub(Duration::from_secs(2)),
        Timestamp::from_millis(0)
    );
    assert_eq!(t.saturating_sub(Duration::MAX), Timestamp::from_millis(0));

    assert!(Timestamp::from_millis(1) < Timestamp::from_millis(2));
    assert_eq!(Timestamp::default(), Timestamp::from_millis(0));
    assert_eq!(t.to_string(), "1000ms");
    assert_eq!(format!("{t:?}"), "Timestamp(1000)");
}

#[test]
fn manual_clock_moves_only_when_told_and_clones_share_time() {
    let clock = ManualClock::new(Timestamp::from_millis(5_000));
    let other = clock.clone();
    assert_eq!(clock.now(), Timestamp::from_millis(5_000));
    assert_eq!(clock.now(), Timestamp::from_millis(5_000));

    clock.advance(Duration::from_millis(250));
    assert_eq!(other.now(), Timestamp::from_millis(5_250));
    other.set(Timestamp::from_millis(42));
    assert_eq!(
        clock.now(),
        Timestamp::from_millis(42),
        "set may move backwards"
    );
    clock.advance(Duration::MAX);
    assert_eq!(
        other.now(),
        Timestamp::from_millis(u64::MAX),
        "advance saturates"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(clock.now(), Timestamp::from_millis(u64::MAX));

    assert_eq!(ManualClock::default().now(), Timestamp::from_millis(0));
}

#[test]
fn manual_clock_advances_add_up_across_threads() {
    let clock = ManualClock::new(Timestamp::from_millis(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let clock = clock.clone();
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    clock.advance(Duration::from_millis(1));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(clock.now(), Timestamp::from_millis(8_000));
}

#[test]
fn system_clock_tells_unix_milliseconds() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let now = u128::from(SystemClock.now().as_millis());
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert!(
        before <= now && now <= after,
        "{before} <= {now} <= {after}"
    );
}

#[test]
fn clocks_are_usable_as_trait_objects() {
    let clocks: Vec<Arc<dyn Clock>> = vec![
        Arc::new(SystemClock),
        Arc::new(ManualClock::new(Timestamp::from_millis(7))),
    ];
    assert!(clocks[0].now() > Timestamp::from_millis(1_600_000_000_000));
    assert_eq!(clocks[1].now(), Timestamp::from_millis(7));
}
