//! What one Act call returns, typed and as the JSON a model sees.

use std::fmt;

use countersign_approval_core::{ApprovalId, OperationId, OutcomeCode, RefusedWrite};
use countersign_canonical_policy::{Action, AuthorizedUrl};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::{Value, json};

use countersign_approval_core::DecidedBy;

/// The result of one Act call.
///
/// Its JSON form ([`to_json`](Self::to_json), or `Serialize`, which keeps
/// the field order below) is what a model sees:
///
/// - ok: `{"status":"ok","operation_id":"op_…","locator":{"approval_id":"apr_…","url":"…","method":"click","selector":"a#docs"},"action":{…canonical…}}`
/// - refused: `{"status":"error","operation_id":"op_…","error":{"code":"APPROVAL_STALE","message":"…"}}`
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActResult {
    /// The grant was consumed and the backend performed the action.
    Ok(Box<Performed>),
    /// Refused or failed; see the code.
    Error(ActError),
}

impl ActResult {
    /// The call's operation id, also in the operation record.
    pub fn operation_id(&self) -> &OperationId {
        match self {
            ActResult::Ok(done) => &done.operation_id,
            ActResult::Error(error) => &error.operation_id,
        }
    }

    /// [`OutcomeCode::Ok`] or the error's code.
    pub fn code(&self) -> OutcomeCode {
        match self {
            ActResult::Ok(_) => OutcomeCode::Ok,
            ActResult::Error(error) => error.code,
        }
    }

    /// Whether the action was performed.
    pub fn is_ok(&self) -> bool {
        matches!(self, ActResult::Ok(_))
    }

    /// The performed action, if any.
    pub fn performed(&self) -> Option<&Performed> {
        match self {
            ActResult::Ok(done) => Some(done),
            ActResult::Error(_) => None,
        }
    }

    /// The error, if any.
    pub fn error(&self) -> Option<&ActError> {
        match self {
            ActResult::Ok(_) => None,
            ActResult::Error(error) => Some(error),
        }
    }

    /// The JSON a model sees.
    pub fn to_json(&self) -> Value {
        match self {
            ActResult::Ok(done) => {
                let mut body = json!({
                    "status": "ok",
                    "operation_id": done.operation_id.as_str(),
                    "locator": {
                        "approval_id": done.approval_id.as_str(),
                        "url": done.url.as_str(),
                        "method": done.action.method(),
                        "selector": done.action.selector(),
                    },
                    "action": done.action.to_json_value(),
                });
                // A person's approval keeps the answer as it always was.
                if let (Some(object), Some(by)) = (body.as_object_mut(), done.named_tier()) {
                    object.insert("decided_by".to_owned(), Value::String(by.to_owned()));
                }
                if let (Some(object), Some(list)) = (body.as_object_mut(), done.refused_list()) {
                    object.insert("refused_writes".to_owned(), json!(list));
                }
                body
            }
            ActResult::Error(error) => json!({
                "status": "error",
                "operation_id": error.operation_id.as_str(),
                "error": {
                    "code": error.code.as_str(),
                    "message": error.message,
                },
            }),
        }
    }
}

struct Locator<'a>(&'a Performed);

impl Serialize for Locator<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Locator", 4)?;
        s.serialize_field("approval_id", self.0.approval_id.as_str())?;
        s.serialize_field("url", self.0.url.as_str())?;
        s.serialize_field("method", self.0.action.method())?;
        s.serialize_field("selector", self.0.action.selector())?;
        s.end()
    }
}

struct ErrorBody<'a>(&'a ActError);

impl Serialize for ErrorBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Error", 2)?;
        s.serialize_field("code", self.0.code.as_str())?;
        s.serialize_field("message", &self.0.message)?;
        s.end()
    }
}

impl Serialize for ActResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ActResult::Ok(done) => {
                let tier = done.named_tier();
                let refused = done.refused_list();
                let fields = 4 + usize::from(tier.is_some()) + usize::from(refused.is_some());
                let mut s = serializer.serialize_struct("ActResult", fields)?;
                s.serialize_field("status", "ok")?;
                s.serialize_field("operation_id", done.operation_id.as_str())?;
                s.serialize_field("locator", &Locator(done))?;
                s.serialize_field("action", &done.action)?;
                if let Some(tier) = tier {
                    s.serialize_field("decided_by", tier)?;
                }
                if let Some(refused) = refused {
                    s.serialize_field("refused_writes", &refused)?;
                }
                s.end()
            }
            ActResult::Error(error) => {
                let mut s = serializer.serialize_struct("ActResult", 3)?;
                s.serialize_field("status", "error")?;
                s.serialize_field("operation_id", error.operation_id.as_str())?;
                s.serialize_field("error", &ErrorBody(error))?;
                s.end()
            }
        }
    }
}

/// An action the backend performed after its grant was consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Performed {
    /// The call's id.
    pub operation_id: OperationId,
    /// The consumed grant.
    pub approval_id: ApprovalId,
    /// The canonical URL.
    pub url: AuthorizedUrl,
    /// The canonical action.
    pub action: Action,
    /// Where the browser landed, for a navigation (`navigate :root`).
    pub landed: Option<crate::navigation::Landed>,
    /// Who approved the grant: a person, a rule or a standing grant (the
    /// answer names the last two, never which).
    pub decided_by: DecidedBy,
    /// What read-only mode refused while the act was performed (an act a
    /// rule approved); the answer lists each as `METHOD address`.
    pub refused_writes: Vec<RefusedWrite>,
}

impl Performed {
    /// `METHOD address` of each write refused, for the answer.
    fn refused_list(&self) -> Option<Vec<String>> {
        if self.refused_writes.is_empty() {
            return None;
        }
        Some(
            self.refused_writes
                .iter()
                .map(|w| format!("{} {}", w.method, w.address))
                .collect(),
        )
    }

    /// `rule` or `standing` when no person approved this act's grant.
    fn named_tier(&self) -> Option<&'static str> {
        match self.decided_by {
            DecidedBy::Person => None,
            other => Some(other.as_str()),
        }
    }
}

/// Why an Act call performed nothing (or, for `BACKEND_FAILED`, why the
/// backend did not complete an action whose grant was consumed).
///
/// The message is lower-case, has no final period, and never quotes an
/// argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActError {
    /// The call's id.
    pub operation_id: OperationId,
    /// The code the model sees.
    pub code: OutcomeCode,
    /// What the model sees as `error.message`.
    pub message: String,
}

impl fmt::Display for ActError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ActError {}
