//! Dropping the records that stopped mattering, oldest first, in bounded
//! steps.

use std::collections::BTreeSet;
use std::time::Duration;

use countersign_approval_core::Timestamp;

/// Takes up to `limit` of the oldest entries of `by_expiry` whose instant
/// plus `retention` is at or before `now`, handing each id to `remove`;
/// returns how many it took.
pub(crate) fn drop_oldest<Id: Ord>(
    by_expiry: &mut BTreeSet<(Timestamp, Id)>,
    now: Timestamp,
    retention: Duration,
    limit: usize,
    mut remove: impl FnMut(Id),
) -> usize {
    let mut dropped = 0;
    while dropped < limit {
        let Some((expires_at, _)) = by_expiry.first() else {
            break;
        };
        if expires_at.saturating_add(retention) > now {
            break;
        }
        if let Some((_, id)) = by_expiry.pop_first() {
            remove(id);
            dropped += 1;
        }
    }
    dropped
}
