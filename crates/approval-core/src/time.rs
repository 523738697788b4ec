//! Time as Unix milliseconds, and the clocks that tell it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time as Unix milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis)
    }
    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }
    /// `self + duration`, or `None` on overflow.
    pub fn checked_add(self, duration: Duration) -> Option<Self> {
        let millis = u64::try_from(duration.as_millis()).ok()?;
        self.0.checked_add(millis).map(Timestamp)
    }
    /// `self + duration`, saturating at the largest timestamp.
    pub fn saturating_add(self, duration: Duration) -> Self {
        self.checked_add(duration).unwrap_or(Timestamp(u64::MAX))
    }
    /// This instant in UTC as RFC 3339 with milliseconds,
    /// `2026-05-01T12:00:00.000Z`: what people and other tools read. An
    /// instant past 9999-12-30T22:00Z (a saturated expiry) is shown as
    /// that instant.
    ///
    /// ```
    /// use countersign_approval_core::Timestamp;
    ///
    /// let at = Timestamp::from_millis(1_777_636_800_250);
    /// assert_eq!(at.to_rfc3339(), "2026-05-01T12:00:00.250Z");
    /// ```
    pub fn to_rfc3339(self) -> String {
        let instant = i64::try_from(self.0)
            .ok()
            .and_then(|millis| jiff::Timestamp::from_millisecond(millis).ok())
            .unwrap_or(jiff::Timestamp::MAX);
        format!("{instant:.3}")
    }
    /// `self - duration`, saturating at the epoch.
    pub fn saturating_sub(self, duration: Duration) -> Self {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_sub(millis))
    }
    /// How long after `earlier` this instant is; zero when it is not after
    /// it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use countersign_approval_core::Timestamp;
    ///
    /// let (proposed, decided) = (Timestamp::from_millis(1_000), Timestamp::from_millis(3_500));
    /// assert_eq!(decided.saturating_duration_since(proposed), Duration::from_millis(2_500));
    /// assert_eq!(proposed.saturating_duration_since(decided), Duration::ZERO);
    /// ```
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.0)
    }
}

/// Tells the current time. Stores take `now` from their caller, so one
/// clock governs expiry for a whole host.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        // A clock before 1970 is a broken host; the epoch makes every grant look
        // issued in the future and expiry still holds.
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Timestamp(millis)
    }
}

/// A clock that moves only when told to; clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use countersign_approval_core::{Clock, ManualClock, Timestamp};
///
/// let clock = ManualClock::new(Timestamp::from_millis(1_000));
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(clock.now(), Timestamp::from_millis(2_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start.as_millis())))
    }
    /// Sets the time.
    pub fn set(&self, now: Timestamp) {
        self.0.store(now.as_millis(), Ordering::SeqCst);
    }
    /// Moves the time forward.
    pub fn advance(&self, by: Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(millis))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn instants_read_as_rfc3339_in_utc_with_milliseconds() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_001, "2000-02-29T00:00:00.001Z"),
            (1_798_761_599_999, "2026-12-31T23:59:59.999Z"),
            // A saturated expiry: the last instant the formatter knows.
            (u64::MAX, "9999-12-30T22:00:00.999Z"),
        ];
        for (millis, text) in cases {
            assert_eq!(Timestamp::from_millis(millis).to_rfc3339(), text);
        }
    }
}
