//! The request state of a 2026-07-28 round in the compatible mode, sealed:
//! the proposal's id with an HMAC-SHA256 over it and the call it belongs
//! to (the caller, the page and the exact action), under a key drawn when
//! the process starts. A state is good only in the process that gave it,
//! for the same caller and the same call; anything else opens to nothing.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_approval_core::ProposalId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every sealed state starts with.
const PREFIX: &str = "pw1.";

/// Seals and opens request states with one process-wide key.
#[derive(Debug)]
pub(crate) struct Sealer {
    /// `None` when the system gave no random bytes: then nothing is
    /// sealed, and clients wait in the call instead.
    key: Option<[u8; 32]>,
}

impl Default for Sealer {
    fn default() -> Self {
        Sealer::new()
    }
}

impl Sealer {
    /// A sealer with a fresh random key.
    pub(crate) fn new() -> Sealer {
        let mut key = [0u8; 32];
        match getrandom::fill(&mut key) {
            Ok(()) => Sealer { key: Some(key) },
            Err(failed) => {
                tracing::warn!(%failed, "no random key for request states; none will be given");
                Sealer { key: None }
            }
        }
    }

    fn mac(&self, proposal: &str, binding: &str) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key.as_ref()?).ok()?;
        mac.update(proposal.as_bytes());
        mac.update(&[0]);
        mac.update(binding.as_bytes());
        Some(mac)
    }

    /// The state naming `proposal` for the call `binding` describes.
    pub(crate) fn seal(&self, proposal: &ProposalId, binding: &str) -> Option<String> {
        let tag = self
            .mac(proposal.as_str(), binding)?
            .finalize()
            .into_bytes();
        Some(format!(
            "{PREFIX}{}.{}",
            proposal.as_str(),
            URL_SAFE_NO_PAD.encode(tag)
        ))
    }

    /// The proposal `state` names, if this sealer sealed it for `binding`.
    pub(crate) fn open(&self, state: &str, binding: &str) -> Option<ProposalId> {
        let (proposal, tag) = state.strip_prefix(PREFIX)?.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(proposal, binding)?.verify_slice(&tag).ok()?;
        ProposalId::parse(proposal)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn a_state_opens_only_for_its_call_in_its_process() {
        let sealer = Sealer::new();
        let id = ProposalId::generate().unwrap();
        let state = sealer.seal(&id, "alice\0run\0https://a/\0click").unwrap();
        assert!(state.starts_with(&format!("pw1.{}.", id.as_str())));
        assert_eq!(
            sealer.open(&state, "alice\0run\0https://a/\0click"),
            Some(id.clone())
        );
        assert_eq!(sealer.open(&state, "mallory\0run\0https://a/\0click"), None);
        assert_eq!(
            sealer.open(&state, "alice\0run\0https://a/\0dblclick"),
            None
        );
        assert_eq!(
            Sealer::new().open(&state, "alice\0run\0https://a/\0click"),
            None
        );
        let other = ProposalId::generate().unwrap();
        let forged = state.replace(id.as_str(), other.as_str());
        assert_eq!(sealer.open(&forged, "alice\0run\0https://a/\0click"), None);
        assert_eq!(sealer.open("countersign-proposal:x", "b"), None);
    }
}
