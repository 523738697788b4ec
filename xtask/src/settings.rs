//! What every program xtask starts is given, whichever part of xtask
//! starts it.

/// No incremental caches: they were 4 GB of a test build's 15 GB, and a CI
/// run builds each crate once.
pub(crate) const INCREMENTAL: (&str, &str) = ("CARGO_INCREMENTAL", "0");
