//! Form tokens and signed result links: HMAC-SHA256 under one key, bound to
//! the approver and to exactly what the form does.

use countersign_approval_core::{ActorId, ApproverId, ProposalId, RunId};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a form key.
pub const FORM_KEY_BYTES: usize = 32;

/// Bytes of a result-link tag: the link only carries what the approver
/// just did, so a shorter tag than a form token is enough.
const TAG_BYTES: usize = 16;

/// The key form tokens and result links are signed with, kept as an
/// HMAC state already keyed with it (so the key bytes are held once).
#[derive(Clone)]
pub(crate) struct FormKey(HmacSha256);

/// The operating system's random source failed, or the key was refused.
#[derive(Debug)]
pub(crate) struct KeyError(pub(crate) String);

impl FormKey {
    pub(crate) fn new(bytes: &[u8; FORM_KEY_BYTES]) -> Result<Self, KeyError> {
        // HMAC accepts keys of any length, so this never fails in practice;
        // it is still an error, never a panic or a weaker key.
        HmacSha256::new_from_slice(bytes)
            .map(FormKey)
            .map_err(|e| KeyError(e.to_string()))
    }

    /// A fresh key from the operating system's CSPRNG.
    pub(crate) fn generate() -> Result<Self, KeyError> {
        let mut bytes = [0u8; FORM_KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError(e.to_string()))?;
        FormKey::new(&bytes)
    }

    fn mac(&self, fields: &[&str]) -> HmacSha256 {
        let mut mac = self.0.clone();
        // Each field is length-prefixed so that no two field lists (an
        // actor id holding `/` or `:`, say) ever sign the same bytes.
        for field in fields {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac
    }

    /// The token a form carries: hex of HMAC(key, fields).
    pub(crate) fn token(&self, fields: &[&str]) -> String {
        encode_hex(&self.mac(fields).finalize().into_bytes())
    }

    /// Whether `token` is the token for `fields`, compared in constant time.
    pub(crate) fn verify(&self, fields: &[&str], token: &str) -> bool {
        match decode_hex(token) {
            Some(bytes) => self.mac(fields).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }

    /// A short tag for a result link.
    pub(crate) fn tag(&self, fields: &[&str]) -> String {
        let full = self.mac(fields).finalize().into_bytes();
        encode_hex(&full[..TAG_BYTES])
    }

    /// Whether `tag` is the tag for `fields`, compared in constant time.
    pub(crate) fn verify_tag(&self, fields: &[&str], tag: &str) -> bool {
        match decode_hex(tag) {
            Some(bytes) if bytes.len() == TAG_BYTES => {
                self.mac(fields).verify_truncated_left(&bytes).is_ok()
            }
            _ => false,
        }
    }
}

impl std::fmt::Debug for FormKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FormKey(..)")
    }
}

/// What every `POST` form carries: its token, the approver's note (read by
/// Approve only), the uses and hours of a standing approval, and the
/// standing grant a Revoke names.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct DecisionForm {
    #[serde(default)]
    pub(crate) token: String,
    #[serde(default)]
    pub(crate) note: String,
    #[serde(default)]
    pub(crate) uses: String,
    #[serde(default)]
    pub(crate) hours: String,
    #[serde(default)]
    pub(crate) standing: String,
}

/// The lifetimes a person may choose for a standing approval, in hours:
/// at most 8, and never past the run's end (a stop ends it at once).
pub(crate) const STANDING_HOURS: [u64; 4] = [1, 2, 4, 8];

/// The fields a Revoke of standing grant `id` in `run` signs.
pub(crate) fn revoke_fields<'a>(
    approver: &'a ApproverId,
    actor: &'a ActorId,
    run: &'a RunId,
    id: &'a str,
) -> [&'a str; 5] {
    [
        "revoke-standing",
        approver.as_str(),
        actor.as_str(),
        run.as_str(),
        id,
    ]
}

/// The fields a form token signs.
pub(crate) fn decision_fields<'a>(
    what: &'a str,
    approver: &'a ApproverId,
    id: &'a ProposalId,
) -> [&'a str; 3] {
    [what, approver.as_str(), id.as_str()]
}

pub(crate) fn stop_fields<'a>(
    approver: &'a ApproverId,
    actor: &'a ActorId,
    run: &'a RunId,
) -> [&'a str; 4] {
    ["stop", approver.as_str(), actor.as_str(), run.as_str()]
}

pub(crate) fn stopped_fields<'a>(
    approver: &'a ApproverId,
    actor: &'a ActorId,
    run: &'a RunId,
    [grants, standing]: [&'a str; 2],
    was: &'a str,
) -> [&'a str; 7] {
    [
        "stopped",
        approver.as_str(),
        actor.as_str(),
        run.as_str(),
        grants,
        standing,
        was,
    ]
}

pub(crate) fn outcome_fields<'a>(
    approver: &'a ApproverId,
    id: &'a ProposalId,
    code: &'a str,
) -> [&'a str; 4] {
    ["outcome", approver.as_str(), id.as_str(), code]
}

fn encode_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_its_own_fields() {
        let key = FormKey::new(&[7; FORM_KEY_BYTES]).unwrap();
        let token = key.token(&["approve", "alice", "prp_1"]);
        assert_eq!(token.len(), 64);
        assert!(key.verify(&["approve", "alice", "prp_1"], &token));
        assert!(!key.verify(&["approve", "bob", "prp_1"], &token));
        assert!(!key.verify(&["deny", "alice", "prp_1"], &token));
        assert!(!key.verify(&["approve", "alice", "prp_2"], &token));
        // Field boundaries are part of what is signed.
        assert!(!key.verify(&["approve", "alic", "eprp_1"], &token));
        assert!(
            !FormKey::new(&[8; FORM_KEY_BYTES])
                .unwrap()
                .verify(&["approve", "alice", "prp_1"], &token)
        );
        assert!(!key.verify(&["approve", "alice", "prp_1"], &token.to_uppercase()));
        assert!(!key.verify(&["approve", "alice", "prp_1"], ""));
        assert!(!key.verify(&["approve", "alice", "prp_1"], &token[..62]));
    }

    #[test]
    fn a_tag_is_short_and_verifies_only_its_own_fields() {
        let key = FormKey::new(&[7; FORM_KEY_BYTES]).unwrap();
        let tag = key.tag(&["outcome", "alice", "prp_1", "approved"]);
        assert_eq!(tag.len(), 32);
        assert!(key.verify_tag(&["outcome", "alice", "prp_1", "approved"], &tag));
        assert!(!key.verify_tag(&["outcome", "alice", "prp_1", "denied"], &tag));
        let token = key.token(&["outcome", "alice", "prp_1", "approved"]);
        assert!(!key.verify_tag(&["outcome", "alice", "prp_1", "approved"], &token));
    }

    #[test]
    fn generated_keys_differ() {
        let (a, b) = (FormKey::generate().unwrap(), FormKey::generate().unwrap());
        assert_ne!(a.token(&["x"]), b.token(&["x"]));
    }
}
