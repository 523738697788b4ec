//! What an action will dispatch, decided from the action alone before the
//! page is touched: each method and the arguments it takes.

use chromiumoxide::keys::{KeyDefinition, get_key_definition};
use countersign_canonical_policy::Action;

use crate::error::{Refused, quoted};

/// What one method will do, decided from the action alone before the page
/// is touched.
#[derive(Debug)]
pub(crate) enum Plan {
    Click {
        count: i64,
        button: Button,
        /// The protocol's modifier bits: Alt 1, Control 2, Meta 4, Shift 8.
        modifiers: i64,
    },
    Hover,
    Focus,
    Fill(String),
    Type(String),
    Press(&'static KeyDefinition),
    Select(String),
    Check(bool),
}

/// The mouse button of a click.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Button {
    Left,
    Right,
    Middle,
}

impl Button {
    /// The `button` argument: `left` (the default), `right` or `middle`.
    fn of(argument: Option<&str>) -> Result<Button, Refused> {
        match argument {
            None | Some("left") => Ok(Button::Left),
            Some("right") => Ok(Button::Right),
            Some("middle") => Ok(Button::Middle),
            Some(other) => Err(format!(
                "`button` is `left`, `right` or `middle`, not `{}`; nothing was dispatched",
                quoted(other)
            )),
        }
    }

    /// The protocol's `buttons` bit of this button.
    pub(crate) fn bit(self) -> i64 {
        match self {
            Button::Left => 1,
            Button::Right => 2,
            Button::Middle => 4,
        }
    }
}

/// The `modifiers` argument: key names separated by commas, each once, of
/// `Alt`, `Control`, `ControlOrMeta` (Control here), `Meta`, `Shift`; as
/// the protocol's bits.
fn modifier_bits(argument: Option<&str>) -> Result<i64, Refused> {
    let Some(list) = argument else {
        return Ok(0);
    };
    let mut bits = 0;
    for name in list.split(',') {
        let bit = match name {
            "Alt" => 1,
            "Control" | "ControlOrMeta" => 2,
            "Meta" => 4,
            "Shift" => 8,
            other => {
                return Err(format!(
                    "`modifiers` are `Alt`, `Control`, `ControlOrMeta`, `Meta` or `Shift`, separated by commas, not `{}`; nothing was dispatched",
                    quoted(other)
                ));
            }
        };
        if bits & bit != 0 {
            return Err(format!(
                "`modifiers` names `{}` twice; nothing was dispatched",
                quoted(name)
            ));
        }
        bits |= bit;
    }
    Ok(bits)
}

impl Plan {
    /// The method and its arguments, or why they are refused. Each method
    /// takes exactly the arguments it documents.
    pub(crate) fn of(action: &Action) -> Result<Plan, Refused> {
        let method = action.method();
        let arguments = action.arguments();
        let only = |wanted: &[&str]| -> Result<(), Refused> {
            if let Some(unknown) = arguments.keys().find(|k| !wanted.contains(&k.as_str())) {
                return Err(format!(
                    "`{method}` takes no argument `{}`; nothing was dispatched",
                    quoted(unknown)
                ));
            }
            if let Some(missing) = wanted.iter().find(|k| !arguments.contains_key(**k)) {
                return Err(format!(
                    "`{method}` needs the argument `{missing}`; nothing was dispatched"
                ));
            }
            Ok(())
        };
        let argument = |key: &str| arguments.get(key).cloned().unwrap_or_default();
        Ok(match method {
            "click" | "dblclick" => {
                if let Some(unknown) = arguments
                    .keys()
                    .find(|k| !matches!(k.as_str(), "button" | "modifiers"))
                {
                    return Err(format!(
                        "`{method}` takes no argument `{}`; nothing was dispatched",
                        quoted(unknown)
                    ));
                }
                Plan::Click {
                    count: if method == "click" { 1 } else { 2 },
                    button: Button::of(arguments.get("button").map(String::as_str))?,
                    modifiers: modifier_bits(arguments.get("modifiers").map(String::as_str))?,
                }
            }
            "hover" => only(&[]).map(|()| Plan::Hover)?,
            "focus" => only(&[]).map(|()| Plan::Focus)?,
            "check" => only(&[]).map(|()| Plan::Check(true))?,
            "uncheck" => only(&[]).map(|()| Plan::Check(false))?,
            "fill" => only(&["text"]).map(|()| Plan::Fill(argument("text")))?,
            "type" => only(&["text"]).map(|()| Plan::Type(argument("text")))?,
            "select" => only(&["value"]).map(|()| Plan::Select(argument("value")))?,
            "press" => {
                only(&["key"])?;
                let key = argument("key");
                let definition = get_key_definition(&key).ok_or_else(|| {
                    format!(
                        "`press` does not know the key `{}`; nothing was dispatched",
                        quoted(&key)
                    )
                })?;
                Plan::Press(definition)
            }
            other => {
                return Err(format!(
                    "the chromium backend does not perform `{}`; nothing was dispatched",
                    quoted(other)
                ));
            }
        })
    }

    /// Whether the method is pointer input, which the target must receive.
    pub(crate) fn needs_pointer(&self) -> bool {
        matches!(self, Plan::Click { .. } | Plan::Hover | Plan::Check(_))
    }

    /// How the input may activate the target, and so submit its form
    /// (`js/identity.js` decides whether it does): `pointer` for a click,
    /// `enter` for an Enter key (which also activates a button, as Space
    /// does), `space` for a Space key, `None` for input that activates
    /// nothing (a hover, a focus, inserted text, arrow keys).
    pub(crate) fn activation(&self) -> Option<&'static str> {
        match self {
            // Only the main button activates: a right click opens a
            // context menu, a middle click submits no form.
            Plan::Click {
                button: Button::Left,
                ..
            }
            | Plan::Check(_) => Some("pointer"),
            Plan::Click { .. } => None,
            Plan::Press(key) if key.key == "Enter" => Some("enter"),
            Plan::Press(key) if key.key == " " => Some("space"),
            // `type` presses a key for each character that has one: a
            // space does; a line break has none and is inserted as text.
            Plan::Type(text) if text.contains(' ') => Some("space"),
            Plan::Hover | Plan::Focus | Plan::Fill(_) | Plan::Press(_) | Plan::Type(_) => None,
            Plan::Select(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use countersign_canonical_policy::{Policy, StaticResolver};
    use serde_json::{Value, json};

    use super::*;

    fn action(value: Value) -> Action {
        Policy::builder()
            .allow_host("example.com")
            .resolver(StaticResolver::new())
            .build()
            .unwrap()
            .authorize_action(&value)
            .unwrap()
    }

    fn refusal(value: Value) -> String {
        Plan::of(&action(value)).unwrap_err()
    }

    #[test]
    fn each_method_takes_exactly_its_documented_arguments() {
        for (method, args) in [
            ("click", json!({})),
            ("dblclick", json!({})),
            ("hover", json!({})),
            ("focus", json!({})),
            ("check", json!({})),
            ("uncheck", json!({})),
            ("fill", json!({"text": "hi"})),
            ("type", json!({"text": "hi"})),
            ("select", json!({"value": "b"})),
            ("press", json!({"key": "Enter"})),
        ] {
            let planned = Plan::of(&action(
                json!({"method": method, "selector": "#x", "arguments": args}),
            ));
            assert!(planned.is_ok(), "{method}: {planned:?}");
        }
    }

    #[test]
    fn unknown_and_missing_arguments_are_refused() {
        assert_eq!(
            refusal(json!({"method": "click", "selector": "#x", "arguments": {"count": "3"}})),
            "`click` takes no argument `count`; nothing was dispatched"
        );
        assert_eq!(
            refusal(json!({"method": "fill", "selector": "#x"})),
            "`fill` needs the argument `text`; nothing was dispatched"
        );
        assert_eq!(
            refusal(
                json!({"method": "fill", "selector": "#x", "arguments": {"text": "a", "value": "b"}})
            ),
            "`fill` takes no argument `value`; nothing was dispatched"
        );
        assert_eq!(
            refusal(json!({"method": "select", "selector": "#x", "arguments": {"text": "a"}})),
            "`select` takes no argument `text`; nothing was dispatched"
        );
        assert_eq!(
            refusal(json!({"method": "press", "selector": "#x"})),
            "`press` needs the argument `key`; nothing was dispatched"
        );
    }

    #[test]
    fn a_click_takes_a_button_and_modifier_keys() {
        let planned = Plan::of(&action(json!({"method": "dblclick", "selector": "#x",
            "arguments": {"button": "right", "modifiers": "Shift,ControlOrMeta"}})))
        .unwrap();
        let Plan::Click {
            count,
            button,
            modifiers,
        } = planned
        else {
            panic!("{planned:?}")
        };
        assert_eq!((count, button, modifiers), (2, Button::Right, 8 | 2));
        assert_eq!(planned.activation(), None, "a right click submits nothing");
        let left = Plan::of(&action(json!({"method": "click", "selector": "#x"}))).unwrap();
        assert_eq!(left.activation(), Some("pointer"));
        assert_eq!(
            refusal(json!({"method": "click", "selector": "#x", "arguments": {"button": "back"}})),
            "`button` is `left`, `right` or `middle`, not `back`; nothing was dispatched"
        );
        assert_eq!(
            refusal(
                json!({"method": "click", "selector": "#x", "arguments": {"modifiers": "Shift,Hyper"}})
            ),
            "`modifiers` are `Alt`, `Control`, `ControlOrMeta`, `Meta` or `Shift`, separated by commas, not `Hyper`; nothing was dispatched"
        );
        assert_eq!(
            refusal(
                json!({"method": "click", "selector": "#x", "arguments": {"modifiers": "Shift,Shift"}})
            ),
            "`modifiers` names `Shift` twice; nothing was dispatched"
        );
    }

    #[test]
    fn an_unknown_key_is_refused() {
        assert_eq!(
            refusal(json!({"method": "press", "selector": "#x", "arguments": {"key": "Hyper"}})),
            "`press` does not know the key `Hyper`; nothing was dispatched"
        );
    }

    #[test]
    fn a_method_outside_the_default_set_is_refused() {
        let policy = Policy::builder()
            .allow_host("example.com")
            .allow_methods(["drag"])
            .resolver(StaticResolver::new())
            .build()
            .unwrap();
        let drag = policy
            .authorize_action(&json!({"method": "drag", "selector": "#x"}))
            .unwrap();
        assert_eq!(
            Plan::of(&drag).unwrap_err(),
            "the chromium backend does not perform `drag`; nothing was dispatched"
        );
    }
}
