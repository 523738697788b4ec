//! Performing one approved action as real input: argument rules, the
//! landed-URL and revision checks, the strict target, then the input events.

use chromiumoxide::cdp::browser_protocol::dom::FocusParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::js_protocol::runtime::RemoteObjectId;
use chromiumoxide::keys::{KeyDefinition, get_key_definition};
use countersign_approval_core::{ActionRequest, BackendError, ElementIdentity};
use countersign_canonical_policy::Action;
use serde_json::Value;

use crate::browser::{MainFrame, Tab};
use crate::error::{Refused, protocol, quoted};
use crate::plan::{Button, Plan};
use crate::script::{Arg, CHECKED, OPTION, On};
use crate::target::{Miss, NOTHING, OptionPlace, Scroll, Target};

/// The button and modifier keys of a click's presses.
#[derive(Debug, Clone, Copy)]
struct Press {
    button: Button,
    modifiers: i64,
}

impl Press {
    /// The main button, no modifier key.
    const MAIN: Press = Press {
        button: Button::Left,
        modifiers: 0,
    };
}

/// What a check of the landed URL is for: its refusal says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Performing an approved action.
    Perform,
    /// Taking a snapshot for a proposed action.
    Snapshot,
}

impl Purpose {
    fn expected(self) -> &'static str {
        match self {
            Purpose::Perform => "approved",
            Purpose::Snapshot => "proposed",
        }
    }

    fn outcome(self) -> &'static str {
        match self {
            Purpose::Perform => "nothing was dispatched",
            Purpose::Snapshot => "no snapshot was taken",
        }
    }
}

/// An action checked against the page and ready for its input events.
struct Ready<'a> {
    plan: Plan,
    selector: &'a str,
    target: Target,
    /// The main frame as the checks saw it.
    frame: MainFrame,
    /// The element an element-bound grant names.
    element: Option<&'a ElementIdentity>,
}

/// How a refusal after the pointer move, before the first press, ends.
const POINTER_MOVED: &str = "the pointer was moved over it, nothing was pressed";

/// How a refusal ends once input had begun.
const NO_MORE: &str = "input had begun, nothing more was dispatched";

/// After a read-only act's input, how long no request may have been held
/// before the act is reported: the writes its own input started are then
/// refused and listed in its record. Later ones are refused all the same.
const SETTLE_QUIET: std::time::Duration = std::time::Duration::from_millis(150);
/// The longest that wait lasts, on a page that never stops requesting.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Tab {
    /// Performs `action` if the page is at `approved_url` (and, when given,
    /// still shows the `expected` revision), the selector names exactly one
    /// suitable element, and the page has not changed by the moment input
    /// is dispatched.
    ///
    /// Every refusal raised before the first input event (`Input.*` or
    /// `DOM.focus`) is [`BackendError::not_dispatched`]; a failure after it
    /// may have acted, including a re-check that refuses after the pointer
    /// move and before the press (see [`dispatch`](Self::dispatch)).
    pub(crate) async fn perform_action(
        &self,
        request: &ActionRequest,
        expected: Option<&str>,
        element: Option<&ElementIdentity>,
    ) -> Result<(), BackendError> {
        let action = &request.action;
        let plan = Plan::of(action).map_err(BackendError::not_dispatched)?;
        let _one_at_a_time = self.inner.input.lock().await;
        let ready = self
            .prepare(plan, request.url.as_str(), action, expected, element)
            .await?;
        let Some(ready) = ready else {
            return Ok(());
        };
        // The act's write access holds before its first input event: a
        // write its click starts is judged by it.
        self.inner
            .writes
            .enter(&request.operation_id, &request.writes)
            .await
            .map_err(|reason| {
                BackendError::not_dispatched(format!(
                    "read-only mode could not be set up ({reason}); nothing was dispatched"
                ))
            })?;
        let dispatched = self.dispatch(ready).await.map_err(BackendError::new);
        if request.writes.is_read_only() {
            self.inner.writes.settle(SETTLE_QUIET, SETTLE_LIMIT).await;
        }
        dispatched
    }

    /// Every check, and nothing that is input: the element to act on, or
    /// `None` when it is already in the wanted state.
    async fn prepare<'a>(
        &self,
        plan: Plan,
        approved_url: &str,
        action: &'a Action,
        expected: Option<&str>,
        element: Option<&'a ElementIdentity>,
    ) -> Result<Option<Ready<'a>>, BackendError> {
        let refused = BackendError::not_dispatched;
        // Landed URL and revision.
        let frame = self
            .main_frame()
            .await
            .map_err(|e| refused(e.to_string()))?;
        self.check_landed(&frame, approved_url, Purpose::Perform)
            .await
            .map_err(refused)?;
        if expected.is_some_and(|expected| expected != frame.revision.as_str()) {
            return Err(BackendError::not_dispatched(
                "the page has loaded a new document since approval; nothing was dispatched",
            ));
        }

        let selector = action.selector();
        let target = self
            .strict_target(&frame, &plan, selector, Scroll::IntoView)
            .await
            .map_err(Miss::into_error)?;
        // The element approved, before anything else is decided about it
        // (even "already checked" would be an answer about another element).
        if let Some(changed) = self
            .identity_changed(&target, &frame, &plan, element, selector, NOTHING)
            .await
            .map_err(refused)?
        {
            return Err(BackendError::stale_target(changed));
        }
        if target.already(&plan) {
            return Ok(None);
        }

        // The page must be the one checked above, right before input.
        self.check_same_page(&frame, NOTHING)
            .await
            .map_err(refused)?;
        Ok(Some(Ready {
            plan,
            selector,
            target,
            frame,
            element,
        }))
    }

    /// Why the target is no longer the element `bound` names (which facts
    /// differ), or `None` when it still is or no element is bound.
    /// `outcome` ends the reason.
    async fn identity_changed(
        &self,
        target: &Target,
        frame: &MainFrame,
        plan: &Plan,
        bound: Option<&ElementIdentity>,
        selector: &str,
        outcome: &str,
    ) -> Result<Option<Refused>, Refused> {
        let Some(bound) = bound else {
            return Ok(None);
        };
        let now = match self.identity(target, frame, plan).await {
            Ok(now) => now,
            Err(Miss::Stale(why)) => {
                return Ok(Some(format!(
                    "`{}` is not the element approved ({why}); {outcome}",
                    quoted(selector)
                )));
            }
            Err(Miss::Refused(reason)) => return Err(reason),
        };
        if now == *bound {
            return Ok(None);
        }
        let differ: Vec<&str> = [
            ("role", now.role() != bound.role()),
            ("accessible name", now.name() != bound.name()),
            ("tag", now.tag() != bound.tag()),
            ("text", now.text() != bound.text()),
            ("attributes", now.attributes() != bound.attributes()),
            ("frames", now.frames() != bound.frames()),
            ("form data", now.submission() != bound.submission()),
        ]
        .into_iter()
        .filter_map(|(field, differs)| differs.then_some(field))
        .collect();
        Ok(Some(format!(
            "`{}` is not the element approved (its {} changed); {outcome}",
            quoted(selector),
            differ.join(", ")
        )))
    }

    /// The main frame must still show `frame`'s document at its URL.
    async fn check_same_page(&self, frame: &MainFrame, outcome: &str) -> Result<(), Refused> {
        let last = self.main_frame().await.map_err(|e| e.to_string())?;
        if last.revision != frame.revision || last.url != frame.url {
            return Err(format!(
                "the page changed while the action was being performed; {outcome}"
            ));
        }
        Ok(())
    }

    /// Right before an input event after the first: the page is the same
    /// document, the target passes the strict rule again at the same
    /// action point (the hit test answers it), for keyboard input it
    /// still has focus, and for an element-bound grant its identity is
    /// still the one approved. `outcome` ends a refusal.
    async fn before_next(&self, ready: &Ready<'_>, outcome: &str) -> Result<(), Refused> {
        self.check_same_page(&ready.frame, outcome).await?;
        self.recheck(&ready.target, &ready.plan, ready.selector, outcome)
            .await?;
        if !ready.plan.needs_pointer() {
            self.check_focused(&ready.target, ready.selector, outcome)
                .await?;
        }
        if let Some(changed) = self
            .identity_changed(
                &ready.target,
                &ready.frame,
                &ready.plan,
                ready.element,
                ready.selector,
                outcome,
            )
            .await?
        {
            return Err(changed);
        }
        Ok(())
    }

    /// The input events: from the first one on, a failure may have acted.
    ///
    /// Before every input event after the first — the press after the
    /// pointer move, each press of a `dblclick`, each key after the focus —
    /// [`before_next`](Self::before_next) checks again and a difference
    /// stops the sequence with nothing more dispatched. Such a refusal
    /// still says the backend may have acted: the pointer move or the
    /// focus reached the page (its `mouseover`, `pointerover` or `focus`
    /// handlers ran), so the grant stays used (`docs/security-model.md`).
    async fn dispatch(&self, ready: Ready<'_>) -> Result<(), Refused> {
        let (x, y) = (ready.target.described.x, ready.target.described.y);
        let selector = ready.selector;
        match &ready.plan {
            Plan::Click {
                count,
                button,
                modifiers,
            } => {
                let press = Press {
                    button: *button,
                    modifiers: *modifiers,
                };
                self.click(&ready, x, y, *count, press).await
            }
            Plan::Hover => self.mouse_move(x, y).await,
            Plan::Focus => self.focus(&ready.target.element).await,
            Plan::Fill(text) => {
                self.focus(&ready.target.element).await?;
                self.before_next(&ready, NO_MORE).await?;
                self.select_all().await?;
                self.before_next(&ready, NO_MORE).await?;
                if text.is_empty() {
                    self.press_key(named_key("Delete")?).await
                } else {
                    self.insert_text(text).await
                }
            }
            Plan::Type(text) => {
                self.focus(&ready.target.element).await?;
                for c in text.chars() {
                    self.before_next(&ready, NO_MORE).await?;
                    let one = c.to_string();
                    match get_key_definition(&one) {
                        Some(definition) if c != '\r' => self.press_key(definition).await?,
                        _ => self.insert_text(&one).await?,
                    }
                }
                Ok(())
            }
            Plan::Press(definition) => {
                self.focus(&ready.target.element).await?;
                self.before_next(&ready, NO_MORE).await?;
                self.press_key(definition).await
            }
            Plan::Check(wanted) => {
                let wanted = *wanted;
                self.click(&ready, x, y, 1, Press::MAIN).await?;
                let now: bool = self
                    .call_value(CHECKED, On::Object(&ready.target.element), Vec::new())
                    .await
                    .map_err(|e| e.to_string())?;
                if now == wanted {
                    Ok(())
                } else {
                    Err(format!(
                        "clicked `{}` but it is still {}",
                        quoted(selector),
                        if wanted { "unchecked" } else { "checked" }
                    ))
                }
            }
            Plan::Select(value) => {
                let Some(place) = ready.target.option else {
                    return Err("internal: select without an option".to_owned());
                };
                self.select_by_keyboard(&ready, place, value).await
            }
        }
    }

    /// The page's current URL, canonicalised by the tab's policy, must be
    /// `expected`.
    pub(crate) async fn check_landed(
        &self,
        frame: &MainFrame,
        expected: &str,
        purpose: Purpose,
    ) -> Result<(), Refused> {
        let landed = self
            .inner
            .policy
            .authorize_destination(&frame.url)
            .await
            .map_err(|denial| {
                format!(
                    "the page is at `{}`, which the policy refuses ({denial}); {}",
                    quoted(&frame.url),
                    purpose.outcome()
                )
            })?;
        if landed.as_str() != expected {
            return Err(format!(
                "the page is at `{}`, not at the {} `{}`; {}",
                quoted(landed.as_str()),
                purpose.expected(),
                quoted(expected),
                purpose.outcome()
            ));
        }
        Ok(())
    }

    async fn select_by_keyboard(
        &self,
        ready: &Ready<'_>,
        mut place: OptionPlace,
        value: &str,
    ) -> Result<(), Refused> {
        let element = &ready.target.element;
        self.focus(element).await?;
        // Arrow keys step over disabled options, so a bounded number of
        // presses either reaches the option or stops moving.
        for _ in 0..1024 {
            if place.current == place.target {
                return Ok(());
            }
            let key = if place.current < place.target {
                "ArrowDown"
            } else {
                "ArrowUp"
            };
            let before = place.current;
            self.before_next(ready, NO_MORE).await?;
            self.press_key(named_key(key)?).await?;
            place = self
                .call_value(
                    OPTION,
                    On::Object(element),
                    vec![Arg::Value(Value::from(value))],
                )
                .await
                .map_err(|e| e.to_string())?;
            if place.current == before {
                break;
            }
        }
        Err(format!(
            "pressed arrow keys on `{}` but the option `{}` is not selected",
            quoted(ready.selector),
            quoted(value)
        ))
    }

    async fn mouse(
        &self,
        kind: DispatchMouseEventType,
        x: i64,
        y: i64,
        press: Option<(i64, Press)>,
    ) -> Result<(), Refused> {
        // Whole CSS pixels: the point the hit test checked.
        let mut event = DispatchMouseEventParams::builder()
            .r#type(kind)
            .x(x as f64)
            .y(y as f64);
        if let Some((count, press)) = press {
            let button = match press.button {
                Button::Left => MouseButton::Left,
                Button::Right => MouseButton::Right,
                Button::Middle => MouseButton::Middle,
            };
            event = event
                .button(button)
                .buttons(press.button.bit())
                .click_count(count)
                .modifiers(press.modifiers);
        }
        let event = event
            .build()
            .map_err(|e| protocol("Input.dispatchMouseEvent", e))?;
        self.inner
            .page
            .execute(event)
            .await
            .map_err(|e| protocol("Input.dispatchMouseEvent", e))?;
        Ok(())
    }

    async fn mouse_move(&self, x: i64, y: i64) -> Result<(), Refused> {
        self.mouse(DispatchMouseEventType::MouseMoved, x, y, None)
            .await
    }

    /// A move, then `count` press/release pairs with rising click counts:
    /// Chromium turns the second pair into a `dblclick`. Each press comes
    /// after [`before_next`](Self::before_next): the page may have reacted
    /// to the move (or to the first click) by putting something else under
    /// the pointer.
    async fn click(
        &self,
        ready: &Ready<'_>,
        x: i64,
        y: i64,
        count: i64,
        press: Press,
    ) -> Result<(), Refused> {
        self.mouse_move(x, y).await?;
        for n in 1..=count {
            let outcome = if n == 1 { POINTER_MOVED } else { NO_MORE };
            self.before_next(ready, outcome).await?;
            self.mouse(DispatchMouseEventType::MousePressed, x, y, Some((n, press)))
                .await?;
            self.mouse(
                DispatchMouseEventType::MouseReleased,
                x,
                y,
                Some((n, press)),
            )
            .await?;
        }
        Ok(())
    }

    /// The protocol's `DOM.focus`: what a click or Tab would do to focus,
    /// without the click's other effects.
    async fn focus(&self, element: &RemoteObjectId) -> Result<(), Refused> {
        let focus = FocusParams {
            object_id: Some(element.clone()),
            ..FocusParams::default()
        };
        self.inner
            .page
            .execute(focus)
            .await
            .map_err(|e| protocol("DOM.focus", e))?;
        Ok(())
    }

    async fn key(&self, event: DispatchKeyEventParams) -> Result<(), Refused> {
        self.inner
            .page
            .execute(event)
            .await
            .map_err(|e| protocol("Input.dispatchKeyEvent", e))?;
        Ok(())
    }

    /// Key down (with its text, if the key types one), then key up.
    async fn press_key(&self, definition: &KeyDefinition) -> Result<(), Refused> {
        let text = definition.text.map(str::to_owned).or_else(|| {
            let mut chars = definition.key.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c.to_string()),
                _ => None,
            }
        });
        let mut down = DispatchKeyEventParams::builder()
            .key(definition.key)
            .code(definition.code)
            .windows_virtual_key_code(definition.key_code);
        down = match &text {
            Some(text) => down
                .r#type(DispatchKeyEventType::KeyDown)
                .text(text.clone())
                .unmodified_text(text.clone()),
            None => down.r#type(DispatchKeyEventType::RawKeyDown),
        };
        let down = down
            .build()
            .map_err(|e| protocol("Input.dispatchKeyEvent", e))?;
        let up = DispatchKeyEventParams::builder()
            .r#type(DispatchKeyEventType::KeyUp)
            .key(definition.key)
            .code(definition.code)
            .windows_virtual_key_code(definition.key_code)
            .build()
            .map_err(|e| protocol("Input.dispatchKeyEvent", e))?;
        self.key(down).await?;
        self.key(up).await
    }

    /// Control+A with the editor's `selectAll` command, as a user's
    /// shortcut selects the field's whole content.
    async fn select_all(&self) -> Result<(), Refused> {
        const CONTROL: i64 = 2;
        let down = DispatchKeyEventParams::builder()
            .r#type(DispatchKeyEventType::RawKeyDown)
            .modifiers(CONTROL)
            .key("a")
            .code("KeyA")
            .windows_virtual_key_code(65)
            .command("selectAll")
            .build()
            .map_err(|e| protocol("Input.dispatchKeyEvent", e))?;
        let up = DispatchKeyEventParams::builder()
            .r#type(DispatchKeyEventType::KeyUp)
            .modifiers(CONTROL)
            .key("a")
            .code("KeyA")
            .windows_virtual_key_code(65)
            .build()
            .map_err(|e| protocol("Input.dispatchKeyEvent", e))?;
        self.key(down).await?;
        self.key(up).await
    }

    async fn insert_text(&self, text: &str) -> Result<(), Refused> {
        self.inner
            .page
            .execute(InsertTextParams::new(text))
            .await
            .map_err(|e| protocol("Input.insertText", e))?;
        Ok(())
    }
}

fn named_key(name: &str) -> Result<&'static KeyDefinition, Refused> {
    get_key_definition(name).ok_or_else(|| format!("internal: no key definition for `{name}`"))
}
