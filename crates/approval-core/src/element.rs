//! What a person approved the target element to be.
//!
//! A page-bound grant names a document; an element-bound one also names
//! what the approver saw the target as: its role and accessible name (as
//! the browser's accessibility tree computes them), tag, visible text, the
//! attributes that decide what a click or an input does, and the chain of
//! frames down to the target's document. A live backend records these
//! facts when the approver's snapshot is taken and reads them again right
//! before each input; any difference refuses the action.
//!
//! The facts are bounded and have one canonical form, so that a store keeps
//! them byte for byte and a re-read compares equal exactly when nothing the
//! person saw has changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::submission::FormSubmission;

/// The attributes an [`ElementIdentity`] may bind: the ones that decide
/// where a click leads or what an input submits. Sorted.
pub const ELEMENT_ATTRIBUTES: &[&str] = &[
    "action",
    "formaction",
    "formmethod",
    "href",
    "method",
    "name",
    "type",
    "value",
];

/// The landmark roles an [`ElementIdentity`] may name as the target's
/// surroundings, as the accessibility tree reports them. Sorted.
pub const LANDMARK_ROLES: &[&str] = &[
    "banner",
    "complementary",
    "contentinfo",
    "form",
    "main",
    "navigation",
    "region",
    "search",
];

/// At most this many landmarks around a target are bound, the innermost
/// first.
pub const MAX_LANDMARKS: usize = 8;

/// At most this many bytes of a role.
pub const MAX_ROLE_BYTES: usize = 64;
/// At most this many bytes of a tag name.
pub const MAX_TAG_BYTES: usize = 64;
/// At most this many bytes of an accessible name (longer names are cut at a
/// character boundary).
pub const MAX_ACCESSIBLE_NAME_BYTES: usize = 512;
/// At most this many bytes of visible text (longer text is cut at a
/// character boundary).
pub const MAX_ELEMENT_TEXT_BYTES: usize = 512;
/// At most this many bytes of one attribute value (longer values are cut at
/// a character boundary).
pub const MAX_ATTRIBUTE_VALUE_BYTES: usize = 1024;
/// At most this many frames from the main frame down to the target's
/// document, the main frame included.
pub const MAX_FRAMES: usize = 8;
/// At most this many bytes of a frame's origin or document id.
pub const MAX_FRAME_FIELD_BYTES: usize = 256;
/// At most this many bytes of an element identity's canonical JSON: what a
/// store must be able to keep (the largest identity, its form data set
/// included, every string escaped at its longest, fits).
pub const MAX_ELEMENT_IDENTITY_BYTES: usize = 128 * 1024;

/// An element identity could not be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElementIdentityError {
    /// The role is longer than [`MAX_ROLE_BYTES`] or not printable ASCII.
    #[error("element role must be at most 64 printable ASCII bytes, got `{0}`")]
    InvalidRole(String),
    /// The tag is empty, too long or not lower-case ASCII letters, digits
    /// and `-`.
    #[error("element tag must be 1 to 64 lower-case ASCII letters, digits or `-`, got `{0}`")]
    InvalidTag(String),
    /// An attribute outside [`ELEMENT_ATTRIBUTES`].
    #[error("element attribute `{0}` is not one an identity binds")]
    UnknownAttribute(String),
    /// No frame, or more than [`MAX_FRAMES`].
    #[error("element frame chain must hold 1 to 8 frames, got {0}")]
    InvalidFrameCount(usize),
    /// A frame's origin or document id is empty, too long or not printable
    /// ASCII.
    #[error("frame {index} has an invalid {field}")]
    InvalidFrame {
        /// The frame's position, the main frame being 0.
        index: usize,
        /// `origin` or `document`.
        field: &'static str,
    },
    /// A landmark outside [`LANDMARK_ROLES`], or more than
    /// [`MAX_LANDMARKS`].
    #[error("element landmarks must be at most 8 of {LANDMARK_LIST}, got `{0}`")]
    InvalidLandmarks(String),
    /// The text is not the canonical JSON of an identity.
    #[error("element identity is not canonical: {0}")]
    NotCanonical(String),
}

/// [`LANDMARK_ROLES`] as an error message lists them.
const LANDMARK_LIST: &str =
    "`banner`, `complementary`, `contentinfo`, `form`, `main`, `navigation`, `region`, `search`";

/// One frame on the way from the main frame to the target's document.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameIdentity {
    // Fields in byte order of their names: the derived serialisation is
    // the canonical one.
    document: String,
    origin: String,
}

impl FrameIdentity {
    /// A frame showing the document `document` (the browser's loader id)
    /// from `origin` (its serialised origin, e.g. `https://pay.example`).
    /// Each must be 1 to [`MAX_FRAME_FIELD_BYTES`] printable ASCII bytes;
    /// [`ElementIdentity::new`] checks them.
    pub fn new(origin: impl Into<String>, document: impl Into<String>) -> FrameIdentity {
        FrameIdentity {
            document: document.into(),
            origin: origin.into(),
        }
    }

    /// The frame's origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The document the frame shows (the browser's loader id).
    pub fn document(&self) -> &str {
        &self.document
    }
}

/// The facts that say what a target element is, as a person approving an
/// action on it saw them: canonical and bounded.
///
/// ```
/// use std::collections::BTreeMap;
/// use countersign_approval_core::{ElementIdentity, FrameIdentity};
///
/// let pay = ElementIdentity::new(
///     "button",
///     "  Pay\n 5.00 EUR ",
///     "BUTTON",
///     "Pay 5.00 EUR",
///     BTreeMap::from([("type".to_owned(), "submit".to_owned())]),
///     vec![FrameIdentity::new("https://shop.example", "D0C")],
/// )?;
/// assert_eq!(pay.name(), "Pay 5.00 EUR");
/// assert_eq!(pay.tag(), "button");
/// assert_eq!(
///     pay.canonical_json(),
///     r#"{"attributes":{"type":"submit"},"frames":[{"document":"D0C","origin":"https://shop.example"}],"name":"Pay 5.00 EUR","role":"button","tag":"button","text":"Pay 5.00 EUR"}"#
/// );
/// assert_eq!(ElementIdentity::from_canonical_json(&pay.canonical_json())?, pay);
/// # Ok::<(), countersign_approval_core::ElementIdentityError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementIdentity {
    // Fields in byte order of their names: the derived serialisation is
    // the canonical one (a `BTreeMap` sorts the attributes).
    attributes: BTreeMap<String, String>,
    frames: Vec<FrameIdentity>,
    /// The landmarks the target sits in, the innermost first. Absent when
    /// none, so identities without one keep their canonical form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    landmarks: Vec<String>,
    name: String,
    role: String,
    /// For a target that submits a form: the form data set it would send.
    /// Absent otherwise, so identities without one keep their canonical
    /// form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    submission: Option<FormSubmission>,
    tag: String,
    text: String,
}

impl ElementIdentity {
    /// The identity of an element: `role` and `name` from the
    /// accessibility tree, its `tag`, its visible `text`, the
    /// [`ELEMENT_ATTRIBUTES`] it has, and the frames from the main frame
    /// down to its document.
    ///
    /// Normalises as a backend must on every read, so that two reads of an
    /// unchanged element compare equal: the tag is lower-cased; the name
    /// and text have runs of white space folded to one space, are trimmed
    /// and cut to their bound at a character boundary; attribute values are
    /// cut to [`MAX_ATTRIBUTE_VALUE_BYTES`] at a character boundary and
    /// otherwise kept verbatim. Refuses an unknown attribute, a role or tag
    /// out of bounds and a frame chain that is empty, too long, or holds an
    /// invalid origin or document id.
    pub fn new(
        role: impl Into<String>,
        name: &str,
        tag: &str,
        text: &str,
        attributes: BTreeMap<String, String>,
        frames: Vec<FrameIdentity>,
    ) -> Result<ElementIdentity, ElementIdentityError> {
        let role = role.into();
        if role.len() > MAX_ROLE_BYTES || !role.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ElementIdentityError::InvalidRole(role));
        }
        let tag = tag.to_ascii_lowercase();
        if tag.is_empty()
            || tag.len() > MAX_TAG_BYTES
            || !tag
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(ElementIdentityError::InvalidTag(tag));
        }
        let mut bounded = BTreeMap::new();
        for (key, value) in attributes {
            if !ELEMENT_ATTRIBUTES.contains(&key.as_str()) {
                return Err(ElementIdentityError::UnknownAttribute(key));
            }
            let value = cut(&value, MAX_ATTRIBUTE_VALUE_BYTES).to_owned();
            bounded.insert(key, value);
        }
        if frames.is_empty() || frames.len() > MAX_FRAMES {
            return Err(ElementIdentityError::InvalidFrameCount(frames.len()));
        }
        for (index, frame) in frames.iter().enumerate() {
            for (field, value) in [("origin", &frame.origin), ("document", &frame.document)] {
                if value.is_empty()
                    || value.len() > MAX_FRAME_FIELD_BYTES
                    || !value.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(ElementIdentityError::InvalidFrame { index, field });
                }
            }
        }
        Ok(ElementIdentity {
            attributes: bounded,
            frames,
            landmarks: Vec::new(),
            name: folded(name, MAX_ACCESSIBLE_NAME_BYTES),
            role,
            submission: None,
            tag,
            text: folded(text, MAX_ELEMENT_TEXT_BYTES),
        })
    }

    /// The role from the accessibility tree (`button`, `link`, …; empty
    /// when the tree gives none).
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The accessible name, folded and bounded.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lower-case tag name.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The visible text, folded and bounded.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The bound attributes (a subset of [`ELEMENT_ATTRIBUTES`]), by name.
    pub fn attributes(&self) -> &BTreeMap<String, String> {
        &self.attributes
    }

    /// The frames from the main frame (first) down to the target's
    /// document (last).
    pub fn frames(&self) -> &[FrameIdentity] {
        &self.frames
    }

    /// This identity, for a target that submits a form, with the form data
    /// set the submit would send.
    pub fn with_submission(mut self, submission: FormSubmission) -> ElementIdentity {
        self.submission = Some(submission);
        self
    }

    /// The form data set a submit from the target would send, when it
    /// submits a form.
    pub fn submission(&self) -> Option<&FormSubmission> {
        self.submission.as_ref()
    }

    /// This identity with the landmarks its target sits in (`search`,
    /// `navigation`, … from [`LANDMARK_ROLES`]), the innermost first, at
    /// most [`MAX_LANDMARKS`]; a rule can tell a text box in a search
    /// landmark from one in a payment form.
    pub fn with_landmarks(
        mut self,
        landmarks: Vec<String>,
    ) -> Result<ElementIdentity, ElementIdentityError> {
        if landmarks.len() > MAX_LANDMARKS {
            return Err(ElementIdentityError::InvalidLandmarks(landmarks.join(", ")));
        }
        if let Some(unknown) = landmarks
            .iter()
            .find(|l| !LANDMARK_ROLES.contains(&l.as_str()))
        {
            return Err(ElementIdentityError::InvalidLandmarks(
                unknown.chars().take(64).collect(),
            ));
        }
        self.landmarks = landmarks;
        Ok(self)
    }

    /// The landmarks the target sits in, the innermost first (empty when
    /// none, or when the backend does not read them).
    pub fn landmarks(&self) -> &[String] {
        &self.landmarks
    }

    /// The canonical JSON: keys sorted by bytes at every level, no white
    /// space, strings escaped as `serde_json` escapes them. This is what
    /// stores keep and what [`digest`](Self::digest) hashes.
    pub fn canonical_json(&self) -> String {
        // Serialising strings and maps of strings cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// SHA-256 of [`canonical_json`](Self::canonical_json), as 64
    /// lower-case hex characters.
    pub fn digest(&self) -> String {
        let hash = Sha256::digest(self.canonical_json().as_bytes());
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads an identity a store kept: only the exact canonical JSON of a
    /// valid identity is accepted, so a damaged or hand-edited record is
    /// refused rather than silently normalised.
    pub fn from_canonical_json(text: &str) -> Result<ElementIdentity, ElementIdentityError> {
        if text.len() > MAX_ELEMENT_IDENTITY_BYTES {
            return Err(ElementIdentityError::NotCanonical(format!(
                "{} bytes, more than {MAX_ELEMENT_IDENTITY_BYTES}",
                text.len()
            )));
        }
        let read: ElementIdentity = serde_json::from_str(text)
            .map_err(|e| ElementIdentityError::NotCanonical(e.to_string()))?;
        let mut rebuilt = ElementIdentity::new(
            read.role,
            &read.name,
            &read.tag,
            &read.text,
            read.attributes,
            read.frames,
        )?;
        rebuilt = rebuilt.with_landmarks(read.landmarks)?;
        if let Some(submission) = read.submission {
            // Deserialising skipped the bounds: check them again.
            let checked = FormSubmission::new(submission.fields().to_vec())
                .map_err(|e| ElementIdentityError::NotCanonical(e.to_string()))?;
            rebuilt = rebuilt.with_submission(checked);
        }
        if rebuilt.canonical_json() != text {
            return Err(ElementIdentityError::NotCanonical(
                "it differs from its canonical form".to_owned(),
            ));
        }
        Ok(rebuilt)
    }

    /// A short description for people: role, name and what the attributes
    /// say it does, e.g. `button "Pay 5.00 EUR" (type submit)`.
    pub fn summary(&self) -> String {
        let role = if self.role.is_empty() {
            &self.tag
        } else {
            &self.role
        };
        let mut summary = format!("{role} \"{}\"", self.name);
        if !self.attributes.is_empty() {
            let attributes: Vec<String> = self
                .attributes
                .iter()
                // An empty value is shown as one, not as nothing.
                .map(|(k, v)| {
                    if v.is_empty() {
                        format!("{k} \"\"")
                    } else {
                        format!("{k} {v}")
                    }
                })
                .collect();
            summary.push_str(&format!(" ({})", attributes.join(", ")));
        }
        summary
    }
}

/// `text` with runs of white space folded to one space, trimmed, and cut to
/// at most `max` bytes at a character boundary.
fn folded(text: &str, max: usize) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&folded, max).trim_end().to_owned()
}

/// The longest prefix of `text` of at most `max` bytes that ends at a
/// character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{submission::FormField, submission::MAX_FORM_BYTES, submission::MAX_FORM_FIELDS};

    fn main_frame() -> Vec<FrameIdentity> {
        vec![FrameIdentity::new("https://shop.example", "LOADER1")]
    }

    #[test]
    fn text_is_folded_and_cut_at_a_character_boundary() {
        let long = "é".repeat(400);
        let id = ElementIdentity::new("button", &long, "b", &long, BTreeMap::new(), main_frame())
            .unwrap();
        assert_eq!(id.name().len(), 512);
        assert_eq!(id.text(), "é".repeat(256));
        let spaced = ElementIdentity::new(
            "",
            "\t a \n\n b  ",
            "a",
            " x ",
            BTreeMap::new(),
            main_frame(),
        )
        .unwrap();
        assert_eq!(spaced.name(), "a b");
        assert_eq!(spaced.text(), "x");
    }

    #[test]
    fn out_of_bounds_parts_are_refused() {
        let attrs = BTreeMap::from([("onclick".to_owned(), "x()".to_owned())]);
        assert_eq!(
            ElementIdentity::new("button", "", "button", "", attrs, main_frame()),
            Err(ElementIdentityError::UnknownAttribute("onclick".to_owned()))
        );
        assert_eq!(
            ElementIdentity::new("button", "", "button", "", BTreeMap::new(), vec![]),
            Err(ElementIdentityError::InvalidFrameCount(0))
        );
        let nine = vec![FrameIdentity::new("https://a.example", "L"); 9];
        assert_eq!(
            ElementIdentity::new("button", "", "button", "", BTreeMap::new(), nine),
            Err(ElementIdentityError::InvalidFrameCount(9))
        );
        assert_eq!(
            ElementIdentity::new("", "", "", "", BTreeMap::new(), main_frame()),
            Err(ElementIdentityError::InvalidTag(String::new()))
        );
        assert_eq!(
            ElementIdentity::new("bad role", "", "a", "", BTreeMap::new(), main_frame()),
            Err(ElementIdentityError::InvalidRole("bad role".to_owned()))
        );
        let spaced = vec![FrameIdentity::new("https://a.example", "two words")];
        assert_eq!(
            ElementIdentity::new("", "", "a", "", BTreeMap::new(), spaced),
            Err(ElementIdentityError::InvalidFrame {
                index: 0,
                field: "document"
            })
        );
    }

    #[test]
    fn only_the_exact_canonical_json_is_read_back() {
        let id = ElementIdentity::new(
            "link",
            "Docs",
            "a",
            "Docs \u{202e}",
            BTreeMap::from([("href".to_owned(), "https://docs.example/\"x\"".to_owned())]),
            main_frame(),
        )
        .unwrap();
        let json = id.canonical_json();
        assert_eq!(ElementIdentity::from_canonical_json(&json).unwrap(), id);
        for damaged in [
            json.replacen("{\"attributes\"", "{ \"attributes\"", 1),
            json.replacen("\"tag\":\"a\"", "\"tag\":\"A\"", 1),
            json.replacen("\"name\":\"Docs\"", "\"name\":\" Docs\"", 1),
            json.replacen('}', ",\"extra\":1}", 1),
            String::new(),
        ] {
            assert!(
                ElementIdentity::from_canonical_json(&damaged).is_err(),
                "{damaged}"
            );
        }
        assert_eq!(id.digest().len(), 64);
        assert_ne!(
            id.digest(),
            ElementIdentity::new("link", "Docs!", "a", "Docs", BTreeMap::new(), main_frame())
                .unwrap()
                .digest()
        );
    }

    #[test]
    fn the_largest_identity_fits_the_stored_bound() {
        let attributes = ELEMENT_ATTRIBUTES
            .iter()
            .map(|k| ((*k).to_owned(), "\u{1}".repeat(MAX_ATTRIBUTE_VALUE_BYTES)))
            .collect();
        let frames = vec![
            FrameIdentity::new(
                "\"".repeat(MAX_FRAME_FIELD_BYTES),
                "\\".repeat(MAX_FRAME_FIELD_BYTES)
            );
            MAX_FRAMES
        ];
        // Every byte of the form data set a control character JSON escapes
        // as six bytes.
        let per_field = MAX_FORM_BYTES / MAX_FORM_FIELDS;
        let fields = (0..MAX_FORM_FIELDS)
            .map(|_| FormField::text("\u{1}", "\u{1}".repeat(per_field - 1)))
            .collect();
        let big = ElementIdentity::new(
            "r".repeat(MAX_ROLE_BYTES),
            &"\u{1}".repeat(4096),
            &"t".repeat(MAX_TAG_BYTES),
            &"\u{1}".repeat(4096),
            attributes,
            frames,
        )
        .unwrap()
        .with_submission(FormSubmission::new(fields).unwrap())
        .with_landmarks(vec!["complementary".to_owned(); MAX_LANDMARKS])
        .unwrap();
        let json = big.canonical_json();
        assert!(json.len() <= MAX_ELEMENT_IDENTITY_BYTES, "{}", json.len());
        assert_eq!(ElementIdentity::from_canonical_json(&json).unwrap(), big);
    }

    #[test]
    fn landmarks_are_bound_in_order_and_only_when_there_are_some() {
        let plain = ElementIdentity::new(
            "textbox",
            "Search",
            "input",
            "",
            BTreeMap::new(),
            main_frame(),
        )
        .unwrap();
        let without = plain.canonical_json();
        assert_eq!(
            without,
            r#"{"attributes":{},"frames":[{"document":"LOADER1","origin":"https://shop.example"}],"name":"Search","role":"textbox","tag":"input","text":""}"#
        );
        let within = plain
            .clone()
            .with_landmarks(vec!["search".to_owned(), "banner".to_owned()])
            .unwrap();
        assert_eq!(within.landmarks(), ["search", "banner"]);
        assert_eq!(
            within.canonical_json(),
            r#"{"attributes":{},"frames":[{"document":"LOADER1","origin":"https://shop.example"}],"landmarks":["search","banner"],"name":"Search","role":"textbox","tag":"input","text":""}"#
        );
        assert_eq!(
            ElementIdentity::from_canonical_json(&within.canonical_json()).unwrap(),
            within
        );
        assert_ne!(within.digest(), plain.digest());
        assert_eq!(
            plain.clone().with_landmarks(vec!["dialog".to_owned()]),
            Err(ElementIdentityError::InvalidLandmarks("dialog".to_owned()))
        );
        assert!(
            plain
                .clone()
                .with_landmarks(vec!["main".to_owned(); MAX_LANDMARKS + 1])
                .is_err()
        );
        // A stored identity naming an unknown landmark is refused, not
        // read without it.
        let forged = without.replace(r#""name""#, r#""landmarks":["dialog"],"name""#);
        assert!(ElementIdentity::from_canonical_json(&forged).is_err());
        assert_eq!(
            ElementIdentityError::InvalidLandmarks("dialog".to_owned()).to_string(),
            "element landmarks must be at most 8 of `banner`, `complementary`, `contentinfo`, `form`, `main`, `navigation`, `region`, `search`, got `dialog`"
        );
    }

    #[test]
    fn summary_names_role_name_and_attributes() {
        let id = ElementIdentity::new(
            "button",
            "Pay 120.00 EUR",
            "button",
            "Pay",
            BTreeMap::from([
                (
                    "formaction".to_owned(),
                    "https://shop.example/pay".to_owned(),
                ),
                ("type".to_owned(), "submit".to_owned()),
                ("value".to_owned(), String::new()),
            ]),
            main_frame(),
        )
        .unwrap();
        assert_eq!(
            id.summary(),
            "button \"Pay 120.00 EUR\" (formaction https://shop.example/pay, type submit, value \"\")"
        );
    }
}
