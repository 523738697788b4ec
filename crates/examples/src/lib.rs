//! The countersign examples that need a browser or a web server, in a
//! package of their own so that the facade's `simulate` example builds
//! without the DevTools client, the egress guard, axum and their
//! dependencies. This library is empty; the examples are the content:
//!
//! ```text
//! cargo run --example live      # headless Chromium, offline
//! cargo run --example approve   # the approval page, a person approves
//! ```
//!
//! Both run from the workspace root as written; `-p countersign-examples`
//! names the package explicitly. The package is never published.
