//! Shared by the broken-store tests: the rendezvous that forces the
//! interleaving a race check needs from a non-atomic test double.

use std::collections::HashMap;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a call waits for another before giving up. Only a safety net:
/// every wait is met by a call the race check has already started, so
/// running into it means the double or the check is wrong, and the test
/// then fails on [`Rendezvous::assert_never_timed_out`] instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

/// Per key (a grant id, a proposal id), counts the calls that have
/// *arrived*: a non-atomic call once it has read the state it decides on, an
/// atomic call once it has finished.
///
/// A non-atomic call that is about to write waits after its read until
/// another call on the same key has arrived, so another read or write
/// always lands between its read and its write — whatever the scheduler
/// does. Only the stores given to race checks have one that is on: a
/// sequential check has no second call to wait for.
pub struct Rendezvous<K> {
    on: bool,
    arrivals: Mutex<HashMap<K, usize>>,
    arrived: Notify,
    timed_out: AtomicBool,
}

impl<K: Eq + Hash + Clone> Rendezvous<K> {
    /// A rendezvous where nobody waits, for stores that sequential checks
    /// and the model test get.
    pub fn off() -> Self {
        Rendezvous {
            on: false,
            arrivals: Mutex::new(HashMap::new()),
            arrived: Notify::new(),
            timed_out: AtomicBool::new(false),
        }
    }

    /// A rendezvous where calls wait, for the stores race checks get.
    pub fn on() -> Self {
        Rendezvous {
            on: true,
            ..Rendezvous::off()
        }
    }

    fn count(&self, key: &K) -> usize {
        self.arrivals.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    /// Counts one call on `key` as arrived and wakes every waiter.
    pub fn arrive(&self, key: &K) {
        *self
            .arrivals
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_insert(0) += 1;
        self.arrived.notify_waiters();
    }

    /// Waits until at least `calls` calls on `key` have arrived (at once
    /// when off).
    pub async fn wait_for(&self, key: &K, calls: usize) {
        if !self.on {
            return;
        }
        let waited = tokio::time::timeout(BOUND, async {
            loop {
                // Registered before the count is read, so an arrival in
                // between still wakes this waiter.
                let mut notified = pin!(self.arrived.notified());
                notified.as_mut().enable();
                if self.count(key) >= calls {
                    return;
                }
                notified.await;
            }
        })
        .await;
        if waited.is_err() {
            self.timed_out.store(true, Ordering::SeqCst);
        }
    }

    /// The step between a non-atomic call's read and its write: arrives,
    /// and when the call `writes`, waits until another call on `key` has
    /// arrived too (before or after this one).
    pub async fn arrive_after_read(&self, key: &K, writes: bool) {
        self.arrive(key);
        if writes {
            self.wait_for(key, 2).await;
        }
    }

    /// Fails the test when some wait ran into the bound: the interleaving
    /// was not forced, so the check's verdict proves nothing either way.
    pub fn assert_never_timed_out(&self, check: &str) {
        assert!(
            !self.timed_out.load(Ordering::SeqCst),
            "{check}: a call waited {BOUND:?} at the rendezvous for another call that never came"
        );
    }
}
