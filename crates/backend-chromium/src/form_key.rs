//! The key a browser binds password fields with, kept apart from the
//! identity reading that uses it and the browser that holds it.

use countersign_approval_core::FormField;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::Refused;

/// The key a browser binds password fields with: random for each launch,
/// kept in memory only. Grants are performed only in the tab (and so the
/// browser) they were approved in, so no other process needs it.
pub(crate) struct FormKey([u8; 32]);

impl FormKey {
    /// A fresh key from the operating system's random source.
    pub(crate) fn generate() -> Result<FormKey, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(FormKey(key))
    }

    /// The password field `name` bound by the HMAC of `value`.
    pub(crate) fn password(&self, name: String, value: &str) -> Result<FormField, Refused> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0)
            .map_err(|_| "internal: the form key was refused".to_owned())?;
        mac.update(value.as_bytes());
        let hash: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(FormField::password(name, hash))
    }
}
