//! What a submit would send: the form data set an element-bound grant binds
//! when its target submits a form.
//!
//! For a submit, what a person approves is the submission, not only the
//! button: a page that sets a hidden `amount` from `5` to `5000` after
//! approval leaves the button as it was. A live backend reads the form
//! data set the HTML form-submission algorithm would build (each control's
//! name and value, in tree order, the submitter included) with the target's
//! identity, and again before each input event; any difference refuses the
//! action.
//!
//! Values are kept as the page holds them, with two exceptions: a password
//! is bound by a keyed hash (the backend's key, never stored), so the value
//! is neither kept nor shown, and a file is bound by its name and size.

use serde::{Deserialize, Serialize};

/// At most this many fields in a bound form data set; a form that would
/// submit more is refused rather than bound in part.
pub const MAX_FORM_FIELDS: usize = 64;

/// At most this many bytes of field names and values (as bound: a
/// password's hash, a file's name) in a bound form data set.
pub const MAX_FORM_BYTES: usize = 8 * 1024;

/// What kind of value a form field carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FormFieldKind {
    /// A text value, kept verbatim.
    Text,
    /// A password: the value is a keyed SHA-256 hash (64 lower-case hex
    /// characters), never the password.
    Password,
    /// A file: the value is the file's name, with its size.
    File,
}

impl FormFieldKind {
    /// `text`, `password` or `file`.
    pub fn as_str(self) -> &'static str {
        match self {
            FormFieldKind::Text => "text",
            FormFieldKind::Password => "password",
            FormFieldKind::File => "file",
        }
    }
}

/// One entry of a form data set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormField {
    // Fields in byte order of their names: the derived serialisation is
    // the canonical one.
    kind: FormFieldKind,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    value: String,
}

impl FormField {
    /// A text field: `name` and `value`, verbatim.
    pub fn text(name: impl Into<String>, value: impl Into<String>) -> FormField {
        FormField {
            kind: FormFieldKind::Text,
            name: name.into(),
            size: None,
            value: value.into(),
        }
    }

    /// A password field, bound by `hash`: 64 lower-case hex characters of
    /// a keyed hash of the value, never the value itself.
    pub fn password(name: impl Into<String>, hash: impl Into<String>) -> FormField {
        FormField {
            kind: FormFieldKind::Password,
            name: name.into(),
            size: None,
            value: hash.into(),
        }
    }

    /// A file field: the file's name and size in bytes (an empty name and
    /// size 0 when no file is chosen, as the form would send).
    pub fn file(name: impl Into<String>, file_name: impl Into<String>, size: u64) -> FormField {
        FormField {
            kind: FormFieldKind::File,
            name: name.into(),
            size: Some(size),
            value: file_name.into(),
        }
    }

    /// What kind of value this is.
    pub fn kind(&self) -> FormFieldKind {
        self.kind
    }

    /// The field's name, as the submission names it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value as bound: the text, a password's hash or a file's name.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// A file's size in bytes; `None` for other kinds.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Bytes this field counts towards [`MAX_FORM_BYTES`].
    fn bytes(&self) -> usize {
        self.name.len() + self.value.len()
    }

    /// Whether the field is well formed for its kind.
    fn is_valid(&self) -> bool {
        match self.kind {
            FormFieldKind::Text => self.size.is_none(),
            FormFieldKind::Password => {
                self.size.is_none()
                    && self.value.len() == 64
                    && self
                        .value
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            }
            FormFieldKind::File => self.size.is_some(),
        }
    }
}

/// Why a form data set cannot be bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormSubmissionError {
    /// More fields than [`MAX_FORM_FIELDS`].
    #[error("it would submit {fields} fields, more than {MAX_FORM_FIELDS}")]
    TooManyFields {
        /// How many fields it would submit.
        fields: usize,
    },
    /// More bytes of names and values than [`MAX_FORM_BYTES`].
    #[error("it would submit more than {MAX_FORM_BYTES} bytes of field names and values")]
    TooManyBytes,
    /// A password that is not a 64-character hash, a file without a size or
    /// a text field with one.
    #[error("form field `{0}` is not well formed for its kind")]
    InvalidField(String),
}

/// The form data set a submit from the target would send, in order.
///
/// ```
/// use countersign_approval_core::{FormField, FormSubmission};
///
/// let set = FormSubmission::new(vec![
///     FormField::text("amount", "5"),
///     FormField::text("currency", "EUR"),
/// ])?;
/// assert_eq!(set.fields().len(), 2);
/// assert_eq!(set.fields()[0].value(), "5");
/// # Ok::<(), countersign_approval_core::FormSubmissionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FormSubmission {
    fields: Vec<FormField>,
}

impl FormSubmission {
    /// The form data set `fields`, in the order the form would send them.
    /// Refuses more than [`MAX_FORM_FIELDS`] fields, more than
    /// [`MAX_FORM_BYTES`] bytes of names and values, and a field not well
    /// formed for its kind.
    pub fn new(fields: Vec<FormField>) -> Result<FormSubmission, FormSubmissionError> {
        if fields.len() > MAX_FORM_FIELDS {
            return Err(FormSubmissionError::TooManyFields {
                fields: fields.len(),
            });
        }
        if fields.iter().map(FormField::bytes).sum::<usize>() > MAX_FORM_BYTES {
            return Err(FormSubmissionError::TooManyBytes);
        }
        if let Some(bad) = fields.iter().find(|f| !f.is_valid()) {
            return Err(FormSubmissionError::InvalidField(bad.name.clone()));
        }
        Ok(FormSubmission { fields })
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[FormField] {
        &self.fields
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_bounds_are_fields_and_bytes() {
        let many = vec![FormField::text("a", "b"); MAX_FORM_FIELDS];
        assert!(FormSubmission::new(many.clone()).is_ok());
        let mut more = many;
        more.push(FormField::text("a", "b"));
        assert_eq!(
            FormSubmission::new(more.clone()),
            Err(FormSubmissionError::TooManyFields { fields: 65 })
        );
        assert_eq!(
            FormSubmission::new(more).unwrap_err().to_string(),
            "it would submit 65 fields, more than 64"
        );
        let full = FormField::text("n", "v".repeat(MAX_FORM_BYTES - 1));
        assert!(FormSubmission::new(vec![full.clone()]).is_ok());
        let over = FormField::text("n", "v".repeat(MAX_FORM_BYTES));
        assert_eq!(
            FormSubmission::new(vec![over]).unwrap_err().to_string(),
            "it would submit more than 8192 bytes of field names and values"
        );
    }

    #[test]
    fn each_kind_has_its_shape() {
        let hash = "0123456789abcdef".repeat(4);
        assert!(FormSubmission::new(vec![FormField::password("pw", hash.clone())]).is_ok());
        for bad in [
            FormField::password("pw", "hunter2"),
            FormField::password("pw", hash.to_uppercase()),
            FormField {
                size: Some(1),
                ..FormField::text("t", "x")
            },
            FormField {
                size: None,
                ..FormField::file("f", "a.pdf", 1)
            },
        ] {
            let name = bad.name().to_owned();
            assert_eq!(
                FormSubmission::new(vec![bad]),
                Err(FormSubmissionError::InvalidField(name))
            );
        }
    }

    #[test]
    fn the_serialisation_is_a_list_of_sorted_keys() {
        let set = FormSubmission::new(vec![
            FormField::text("amount", "5"),
            FormField::file("doc", "a \"b\".pdf", 12),
        ])
        .unwrap();
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#"[{"kind":"text","name":"amount","value":"5"},{"kind":"file","name":"doc","size":12,"value":"a \"b\".pdf"}]"#
        );
    }
}
