//! The slot cache: what a store remembers of the grants it issued or read
//! lately, so that a call on one of them skips the reads that find and
//! validate it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use countersign_approval_core::ApprovalId;

use crate::record::Head;

/// How many grant ids a store remembers the slot (and fingerprint) of: an
/// abandon after a consume goes straight to the grant's slot, and a
/// consume or revoke of a grant this store issued or read goes out in one
/// round trip. Past it the memory starts afresh.
const SLOT_CACHE_ENTRIES: usize = 16_384;

/// What a store remembers of one grant.
#[derive(Debug, Clone)]
struct Known {
    /// The tag of its actor's slot.
    tag: String,
    /// The fingerprint of its fixed fields as this store validated them
    /// (it wrote them at issue, or read them with the strict reader).
    fingerprint: Option<String>,
    /// The head of the record as this store encoded it at issue, with its
    /// grant: a consume's reply that starts with it is read past it only.
    head: Option<Arc<Head>>,
}

/// What a store remembers of grants, by id: their slots, and the
/// fingerprints of fixed fields it validated. A poisoned lock is used as
/// it is: each write leaves the map whole, and it is only a cache.
#[derive(Debug, Default)]
pub(crate) struct SlotCache(Mutex<HashMap<ApprovalId, Known>>);

impl SlotCache {
    /// The tag of grant `id`'s slot, when this store knows it.
    pub(crate) fn tag(&self, id: &ApprovalId) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .map(|known| known.tag.clone())
    }

    /// The slot tag and validated fingerprint of grant `id`, when this
    /// store has both, and the head of its record when this store issued it.
    pub(crate) fn validated(&self, id: &ApprovalId) -> Option<(String, String, Option<Arc<Head>>)> {
        let known = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()?;
        let fingerprint = known.fingerprint?;
        Some((known.tag, fingerprint, known.head))
    }

    /// Remembers the head of grant `id`'s record as this store encoded it
    /// at issue (after [`remember`](Self::remember) of its slot).
    pub(crate) fn remember_head(&self, id: &ApprovalId, head: Head) {
        let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = slots.get_mut(id) {
            known.head = Some(Arc::new(head));
        }
    }

    /// Remembers grant `id`'s slot, and the fingerprint of fixed fields
    /// this store validated (`None` keeps one it knew for the same slot).
    pub(crate) fn remember(&self, id: &ApprovalId, tag: &str, fingerprint: Option<&str>) {
        let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = slots.get_mut(id)
            && known.tag == tag
        {
            if let Some(fingerprint) = fingerprint {
                known.fingerprint = Some(fingerprint.to_owned());
            }
            return;
        }
        if slots.len() >= SLOT_CACHE_ENTRIES {
            slots.clear();
        }
        slots.insert(
            id.clone(),
            Known {
                tag: tag.to_owned(),
                fingerprint: fingerprint.map(str::to_owned),
                head: None,
            },
        );
    }

    /// Forgets what this store knew of grant `id` (its record changed, or
    /// is gone from where it was).
    pub(crate) fn forget(&self, id: &ApprovalId) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}
