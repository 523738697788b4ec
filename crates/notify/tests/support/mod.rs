//! What both notification test files set up.

#![allow(clippy::unwrap_used)]

use countersign_approval_core::policy::{Policy, StaticResolver};

/// A policy allowing `shop.example.com`, resolved to a public address.
pub fn shop_policy() -> Policy {
    Policy::builder()
        .allow_host("shop.example.com")
        .resolver(StaticResolver::answering_all([std::net::IpAddr::from([
            93, 184, 216, 34,
        ])]))
        .build()
        .unwrap()
}
