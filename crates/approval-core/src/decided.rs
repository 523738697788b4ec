//! Who decided a proposal, as the model is told.

use crate::ids::ApproverId;

/// Who decided a proposal, as the model is told: never which rule, nor
/// which person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecidedBy {
    /// One of the host's rules approved it.
    Rule,
    /// A person decided on the approval page (or the host did, in code).
    Person,
    /// A standing grant a person approved covered it.
    Standing,
}

impl DecidedBy {
    /// `rule`, `person` or `standing`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Rule => "rule",
            DecidedBy::Person => "person",
            DecidedBy::Standing => "standing",
        }
    }

    /// Who decided, from the approver a decision recorded: a rule's grant
    /// records `rule:<id>`, a standing grant's `standing:<id>`.
    pub fn of(approver: Option<&ApproverId>) -> DecidedBy {
        match approver {
            Some(id) if id.is_rule() => DecidedBy::Rule,
            Some(id) if id.standing_grant().is_some() => DecidedBy::Standing,
            _ => DecidedBy::Person,
        }
    }
}
