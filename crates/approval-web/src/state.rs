//! What every handler shares: built once by
//! [`ApprovalPagesBuilder::build`](crate::ApprovalPagesBuilder::build),
//! read by every request.

use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{Clock, ProposalStore};

use crate::auth::Approvers;
use crate::forms::FormKey;

/// Everything the handlers share.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn ProposalStore>,
    pub(crate) approvers: Arc<dyn Approvers>,
    pub(crate) grant_ttl: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) key: FormKey,
}

/// The router's state, as every handler receives it.
pub(crate) type App = Arc<Shared>;
