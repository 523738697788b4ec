//! Identifiers: generated ones (grants, attempts, operations) and host-owned ones (actors, runs).

use std::fmt;

/// A generated id could not be produced because the OS random source failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomnessError(String);

/// 128 bits from the OS CSPRNG as 32 lower-case hex characters.
fn random_hex_128() -> Result<String, RandomnessError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| RandomnessError(e.to_string()))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(32);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    Ok(out)
}

/// Whether `s` has the shape `[A-Za-z0-9_-]{1,128}` that every id text must have.
fn is_token(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

macro_rules! token_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The prefix of generated ids.
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id: the prefix and 128 bits from the OS CSPRNG as 32 lower-case hex characters.
            pub fn generate() -> Result<Self, RandomnessError> {
                Ok($name(format!("{}{}", $prefix, random_hex_128()?)))
            }

            /// Accepts any text of the shape `[A-Za-z0-9_-]{1,128}`; `None` otherwise.
            ///
            /// Text from a model that does not parse must be treated as an unknown id.
            pub fn parse(text: &str) -> Option<Self> {
                is_token(text).then(|| $name(text.to_owned()))
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

token_id!(
    /// The id of a grant: generated as `apr_` + 32 lower-case hex characters.
    ApprovalId,
    "apr_"
);
token_id!(
    /// The id of one attempt to consume a grant. A retry of the same attempt
    /// (after a lost reply) reuses it, so the store can answer a replay.
    AttemptId,
    "att_"
);
token_id!(
    /// The id of a proposal: generated as `prp_` + 32 lower-case hex characters.
    ProposalId,
    "prp_"
);
token_id!(
    /// The id of a standing grant: generated as `stg_` + 32 lower-case hex
    /// characters.
    StandingId,
    "stg_"
);
token_id!(
    /// The id of one notification event: `evt_` + 32 lower-case hex
    /// characters, derived from what happened (see
    /// [`NotificationEvent`](crate::NotificationEvent)), so the same event
    /// recorded twice has one id. Receivers deduplicate on it.
    EventId,
    "evt_"
);

impl EventId {
    /// The id of the event `subject` names: the first 128 bits of its
    /// SHA-256, as hex.
    pub(crate) fn of_subject(subject: &str) -> EventId {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(subject.as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        EventId(format!("{}{hex}", Self::PREFIX))
    }
}

token_id!(
    /// The id of one Act call, recorded in the operation log.
    OperationId,
    "op_"
);

/// Longest actor or run id, in UTF-8 bytes.
pub const MAX_HOST_ID_BYTES: usize = 256;

/// A host-owned id that is empty, too long or holds a control character
/// (U+0000–U+001F, U+007F–U+009F).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} must be 1 to 256 bytes without control characters")]
pub struct InvalidHostId {
    kind: &'static str,
}

/// Whether `text` holds a control character: Unicode's general category
/// Cc, that is C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F).
///
/// The one rule for every host-supplied text the core refuses control
/// characters in: actor, run and approver ids, and approver notes. (The
/// policy's selector and description rule is its own: C0 and DEL, part of
/// the canonical action.)
pub(crate) fn holds_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

fn check_host_id(text: &str, kind: &'static str) -> Result<(), InvalidHostId> {
    let ok = !text.is_empty() && text.len() <= MAX_HOST_ID_BYTES && !holds_control(text);
    if ok {
        Ok(())
    } else {
        Err(InvalidHostId { kind })
    }
}

macro_rules! host_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Accepts 1 to 256 bytes without control characters
            /// (U+0000–U+001F, U+007F–U+009F).
            pub fn new(text: impl Into<String>) -> Result<Self, InvalidHostId> {
                let text = text.into();
                check_host_id(&text, $kind)?;
                Ok($name(text))
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

host_id!(
    /// Who acts: set by the host, never taken from model output.
    ActorId,
    "actor id"
);
host_id!(
    /// Which agent run acts: set by the host, never taken from model output.
    RunId,
    "run id"
);
host_id!(
    /// Who approved a grant: the host's own id of the person or system that
    /// decided (from the host's authentication), never taken from model
    /// output. Ids that start with [`RULE_APPROVER_PREFIX`] name a rule
    /// that decided (`countersign-rules`), never a person.
    ApproverId,
    "approver id"
);

/// How the approver id of a grant a rule approved starts: `rule:`, then the
/// rule's id. Reserved: the approval pages refuse a person with such an id,
/// so a decision that reads as a rule's was a rule's.
pub const RULE_APPROVER_PREFIX: &str = "rule:";

/// How the approver id of a grant a standing grant approved starts:
/// `standing:`, then the standing grant's id. Reserved like
/// [`RULE_APPROVER_PREFIX`].
pub const STANDING_APPROVER_PREFIX: &str = "standing:";

impl ApproverId {
    /// Whether this id names a rule (`rule:<id>`), not a person.
    pub fn is_rule(&self) -> bool {
        self.0.starts_with(RULE_APPROVER_PREFIX)
    }

    /// The approver id of a grant the standing grant `id` approved.
    pub fn for_standing(id: &StandingId) -> ApproverId {
        ApproverId(format!("{STANDING_APPROVER_PREFIX}{}", id.as_str()))
    }

    /// The standing grant that approved, for an id `standing:<stg id>`.
    pub fn standing_grant(&self) -> Option<StandingId> {
        self.0
            .strip_prefix(STANDING_APPROVER_PREFIX)
            .and_then(StandingId::parse)
    }

    /// Whether this id is one only the library gives (a rule's or a
    /// standing grant's): a person never has it.
    pub fn is_reserved(&self) -> bool {
        self.is_rule() || self.0.starts_with(STANDING_APPROVER_PREFIX)
    }
}
