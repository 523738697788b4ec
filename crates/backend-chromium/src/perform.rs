//! Performing one approved action as real input: argument rules, the
//! landed-URL and revision checks, the strict target, then the input events.

use chromiumoxide::cdp::browser_protocol::dom::FocusParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, ExceptionDetails, RemoteObjectId, RemoteObjectType,
};
use chromiumoxide::keys::{KeyDefinition, get_key_definition};
use countersign_approval_core::BackendError;
use countersign_canonical_policy::Action;
use serde::Deserialize;
use serde_json::Value;

use crate::browser::{MainFrame, Tab};

/// Why an action was not (fully) performed; becomes the backend's message.
pub(crate) type Refused = String;

/// Shortens user text quoted in a message.
fn quoted(text: &str) -> String {
    const LIMIT: usize = 64;
    let shown: String = text
        .chars()
        .take(LIMIT)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if text.chars().count() > LIMIT {
        format!("{shown}…")
    } else {
        shown
    }
}

/// What one method will do, decided from the action alone before the page
/// is touched.
#[derive(Debug)]
pub(crate) enum Plan {
    Click { count: i64 },
    Hover,
    Focus,
    Fill(String),
    Type(String),
    Press(&'static KeyDefinition),
    Select(String),
    Check(bool),
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
            "click" => only(&[]).map(|()| Plan::Click { count: 1 })?,
            "dblclick" => only(&[]).map(|()| Plan::Click { count: 2 })?,
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

    fn needs_pointer(&self) -> bool {
        matches!(self, Plan::Click { .. } | Plan::Hover | Plan::Check(_))
    }
}

/// Finds the selector's elements; returns the element when there is
/// exactly one, else the count, else `"invalid"`.
const RESOLVE: &str = r#"function (selector) {
  let found;
  try { found = document.querySelectorAll(selector); } catch (e) { return "invalid"; }
  return found.length === 1 ? found[0] : found.length;
}"#;

/// Reports what the strict checks need, after bringing the element into
/// view when `scroll` is true (performing scrolls, as a user would before
/// acting; a snapshot does not, since a scroll is something the page sees
/// and may act on). The pointer point is the centre of the part of the box
/// inside the viewport, as Playwright's clickable point is; for an element
/// that fits the viewport once scrolled into view, its centre.
const DESCRIBE: &str = r#"function (scroll) {
  const el = this;
  if (!el.isConnected) return { connected: false };
  if (scroll) el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const rect = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  const visible = rect.width > 0 && rect.height > 0 && style.visibility === "visible"
    && el.checkVisibility({ visibilityProperty: true, checkVisibilityCSS: true });
  const tag = el.localName;
  const type = tag === "input" ? (el.getAttribute("type") || "text").toLowerCase() : "";
  const notText = ["checkbox", "radio", "button", "submit", "reset", "file", "image", "color", "range", "hidden"];
  const textInput = tag === "textarea" || (tag === "input" && !notText.includes(type));
  const disabled = el.matches(":disabled") || el.getAttribute("aria-disabled") === "true";
  const vv = window.visualViewport;
  const root = document.documentElement;
  const view = vv
    ? { left: vv.offsetLeft, top: vv.offsetTop, width: vv.width, height: vv.height, scale: vv.scale }
    : { left: 0, top: 0, width: root.clientWidth, height: root.clientHeight, scale: 1 };
  const left = Math.max(rect.left, view.left);
  const top = Math.max(rect.top, view.top);
  const right = Math.min(rect.right, view.left + view.width);
  const bottom = Math.min(rect.bottom, view.top + view.height);
  const inView = right > left && bottom > top;
  const x = inView ? (left + right) / 2 : rect.left + rect.width / 2;
  const y = inView ? (top + bottom) / 2 : rect.top + rect.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {
    connected: true, visible, enabled: !disabled,
    editable: el.isContentEditable || (textInput && !el.readOnly),
    tag, type, checked: el.checked === true, multiple: el.multiple === true,
    x, y, receives: hit !== null && (hit === el || el.contains(hit)),
    bounds: { left: rect.left, top: rect.top, width: rect.width, height: rect.height },
    view, in_view: inView, pixel_ratio: window.devicePixelRatio,
  };
}"#;

/// For a `<select>`: where the option with `value` is and whether it can be chosen.
const OPTION: &str = r#"function (value) {
  const options = Array.from(this.options);
  const target = options.findIndex(o => o.value === value);
  if (target < 0) return { found: false, current: this.selectedIndex, target: -1, disabled: false };
  const option = options[target];
  const group = option.parentElement && option.parentElement.localName === "optgroup" ? option.parentElement : null;
  return { found: true, current: this.selectedIndex, target, disabled: option.disabled || (group !== null && group.disabled) };
}"#;

/// Reads `checked`.
const CHECKED: &str = "function () { return this.checked === true; }";

#[derive(Debug, Deserialize)]
pub(crate) struct Described {
    connected: bool,
    #[serde(default)]
    visible: bool,
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    editable: bool,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    r#type: String,
    #[serde(default)]
    checked: bool,
    #[serde(default)]
    multiple: bool,
    #[serde(default)]
    x: f64,
    #[serde(default)]
    y: f64,
    #[serde(default)]
    receives: bool,
    /// The border box, in CSS pixels of the layout viewport.
    #[serde(default)]
    pub(crate) bounds: Rect,
    /// The visual viewport: what a screenshot shows.
    #[serde(default)]
    pub(crate) view: View,
    /// Whether some of the border box is inside the viewport.
    #[serde(default)]
    pub(crate) in_view: bool,
    /// Device pixels per CSS pixel (`window.devicePixelRatio`).
    #[serde(default = "one")]
    pub(crate) pixel_ratio: f64,
}

fn one() -> f64 {
    1.0
}

/// A box in CSS pixels, relative to the layout viewport.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct Rect {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
}

/// The visual viewport (`window.visualViewport`): its offset within the
/// layout viewport in CSS pixels, and its pinch-zoom scale. (Its size is
/// used by the page script alone, for `in_view`.)
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct View {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) scale: f64,
}

impl Default for View {
    fn default() -> Self {
        View {
            left: 0.0,
            top: 0.0,
            scale: 1.0,
        }
    }
}

#[derive(Debug, Deserialize)]
struct OptionPlace {
    found: bool,
    current: i64,
    target: i64,
    disabled: bool,
}

/// The text of a script exception, for messages.
pub(crate) fn exception_text(details: &ExceptionDetails) -> String {
    details
        .exception
        .as_ref()
        .and_then(|e| e.description.clone())
        .unwrap_or_else(|| details.text.clone())
}

fn protocol(command: &str, error: impl std::fmt::Display) -> Refused {
    format!("chromium did not answer `{command}`: {error}")
}

/// The one element an action targets, after every strict check and the
/// method's own checks, none of which dispatches anything.
pub(crate) struct Target {
    element: RemoteObjectId,
    pub(crate) described: Described,
    option: Option<OptionPlace>,
}

impl Target {
    /// Whether the element is already in the state `plan` wants: a user
    /// would not click a box already in that state, nor pick the option
    /// already chosen.
    fn already(&self, plan: &Plan) -> bool {
        match (plan, &self.option) {
            (Plan::Check(wanted), _) => self.described.checked == *wanted,
            (_, Some(place)) => place.current == place.target,
            _ => false,
        }
    }
}

/// Whether resolving the target may scroll it into view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scroll {
    /// Scroll it to the viewport's centre first, as performing does.
    IntoView,
    /// Leave the page as it is, as a snapshot does.
    No,
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
}

impl Tab {
    /// Performs `action` if the page is at `approved_url` (and, when given,
    /// still shows the `expected` revision), the selector names exactly one
    /// suitable element, and the page has not changed by the moment input
    /// is dispatched.
    ///
    /// Every refusal raised before the first input event (`Input.*` or
    /// `DOM.focus`) is [`BackendError::not_dispatched`]; a failure after it
    /// may have acted.
    pub(crate) async fn perform_action(
        &self,
        approved_url: &str,
        action: &Action,
        expected: Option<&str>,
    ) -> Result<(), BackendError> {
        let plan = Plan::of(action).map_err(BackendError::not_dispatched)?;
        let _one_at_a_time = self.inner.input.lock().await;
        let ready = self
            .prepare(plan, approved_url, action, expected)
            .await
            .map_err(BackendError::not_dispatched)?;
        match ready {
            Some(ready) => self.dispatch(ready).await.map_err(BackendError::new),
            None => Ok(()),
        }
    }

    /// Every check, and nothing that is input: the element to act on, or
    /// `None` when it is already in the wanted state.
    async fn prepare<'a>(
        &self,
        plan: Plan,
        approved_url: &str,
        action: &'a Action,
        expected: Option<&str>,
    ) -> Result<Option<Ready<'a>>, Refused> {
        // Landed URL and revision.
        let frame = self.main_frame().await.map_err(|e| e.to_string())?;
        self.check_landed(&frame, approved_url, Purpose::Perform)
            .await?;
        if expected.is_some_and(|expected| expected != frame.revision.as_str()) {
            return Err(
                "the page has loaded a new document since approval; nothing was dispatched"
                    .to_owned(),
            );
        }

        let selector = action.selector();
        let target = self
            .strict_target(&frame, &plan, selector, Scroll::IntoView)
            .await?;
        if target.already(&plan) {
            return Ok(None);
        }

        // The page must be the one checked above, right before input.
        let last = self.main_frame().await.map_err(|e| e.to_string())?;
        if last.revision != frame.revision || last.url != frame.url {
            return Err(
                "the page changed while the action was being prepared; nothing was dispatched"
                    .to_owned(),
            );
        }
        Ok(Some(Ready {
            plan,
            selector,
            target,
        }))
    }

    /// The strict target (exactly one element, visible, enabled, suited to
    /// the method, receiving the pointer for the pointer methods) and the
    /// method's own checks, in `frame`'s main world's DOM through a fresh
    /// isolated world. Dispatches nothing; scrolls only with
    /// [`Scroll::IntoView`]. Performing and snapshots share this one rule.
    pub(crate) async fn strict_target(
        &self,
        frame: &MainFrame,
        plan: &Plan,
        selector: &str,
        scroll: Scroll,
    ) -> Result<Target, Refused> {
        let world = self
            .isolated_world(frame.id.clone())
            .await
            .map_err(|e| e.to_string())?;
        let element = self.resolve(world, selector).await?;
        let described: Described = self
            .call_on(
                &element,
                DESCRIBE,
                Some(Value::Bool(scroll == Scroll::IntoView)),
            )
            .await?;
        check_target(plan, selector, &described)?;

        // Method-specific checks that dispatch nothing.
        let option = match plan {
            Plan::Select(value) => {
                let place: OptionPlace = self
                    .call_on(&element, OPTION, Some(Value::from(value.as_str())))
                    .await?;
                if !place.found {
                    return Err(format!(
                        "`{}` has no option with value `{}`; nothing was dispatched",
                        quoted(selector),
                        quoted(value)
                    ));
                }
                if place.disabled {
                    return Err(format!(
                        "the option `{}` of `{}` is disabled; nothing was dispatched",
                        quoted(value),
                        quoted(selector)
                    ));
                }
                Some(place)
            }
            _ => None,
        };
        Ok(Target {
            element,
            described,
            option,
        })
    }

    /// The input events: from the first one on, a failure may have acted.
    async fn dispatch(&self, ready: Ready<'_>) -> Result<(), Refused> {
        let Ready {
            plan,
            selector,
            target:
                Target {
                    element,
                    described,
                    option,
                },
        } = ready;
        match plan {
            Plan::Click { count } => self.click(described.x, described.y, count).await,
            Plan::Hover => self.mouse_move(described.x, described.y).await,
            Plan::Focus => self.focus(&element).await,
            Plan::Fill(text) => {
                self.focus(&element).await?;
                self.select_all().await?;
                if text.is_empty() {
                    self.press_key(named_key("Delete")?).await
                } else {
                    self.insert_text(&text).await
                }
            }
            Plan::Type(text) => {
                self.focus(&element).await?;
                for c in text.chars() {
                    let one = c.to_string();
                    match get_key_definition(&one) {
                        Some(definition) if c != '\r' => self.press_key(definition).await?,
                        _ => self.insert_text(&one).await?,
                    }
                }
                Ok(())
            }
            Plan::Press(definition) => {
                self.focus(&element).await?;
                self.press_key(definition).await
            }
            Plan::Check(wanted) => {
                self.click(described.x, described.y, 1).await?;
                let now: bool = self.call_on(&element, CHECKED, None).await?;
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
                let Some(place) = option else {
                    return Err("internal: select without an option".to_owned());
                };
                self.select_by_keyboard(&element, place, selector, &value)
                    .await
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

    async fn resolve(
        &self,
        world: chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId,
        selector: &str,
    ) -> Result<RemoteObjectId, Refused> {
        let mut call = CallFunctionOnParams::new(RESOLVE);
        call.execution_context_id = Some(world);
        call.arguments = Some(vec![argument(Value::from(selector))]);
        let answer = self
            .inner
            .page
            .execute(call)
            .await
            .map_err(|e| protocol("Runtime.callFunctionOn", e))?;
        if let Some(details) = &answer.result.exception_details {
            return Err(format!("page script failed: {}", exception_text(details)));
        }
        let object = &answer.result.result;
        let shown = quoted(selector);
        match (&object.r#type, &object.object_id, &object.value) {
            (RemoteObjectType::Object, Some(id), _) => Ok(id.clone()),
            (_, _, Some(Value::String(_))) => Err(format!(
                "`{shown}` is not a valid css selector; nothing was dispatched"
            )),
            (_, _, Some(Value::Number(n))) if n.as_u64() == Some(0) => Err(format!(
                "`{shown}` matches no element; nothing was dispatched"
            )),
            (_, _, Some(Value::Number(n))) => Err(format!(
                "`{shown}` matches {n} elements, not exactly one; nothing was dispatched"
            )),
            _ => Err(format!(
                "`{shown}` did not resolve to an element; nothing was dispatched"
            )),
        }
    }

    async fn call_on<T: serde::de::DeserializeOwned>(
        &self,
        element: &RemoteObjectId,
        function: &str,
        value: Option<Value>,
    ) -> Result<T, Refused> {
        let mut call = CallFunctionOnParams::new(function);
        call.object_id = Some(element.clone());
        call.return_by_value = Some(true);
        call.arguments = value.map(|v| vec![argument(v)]);
        let answer = self
            .inner
            .page
            .execute(call)
            .await
            .map_err(|e| protocol("Runtime.callFunctionOn", e))?;
        if let Some(details) = &answer.result.exception_details {
            return Err(format!("page script failed: {}", exception_text(details)));
        }
        let value = answer.result.result.value.clone().unwrap_or_default();
        serde_json::from_value(value).map_err(|e| format!("unexpected page answer: {e}"))
    }

    async fn select_by_keyboard(
        &self,
        element: &RemoteObjectId,
        mut place: OptionPlace,
        selector: &str,
        value: &str,
    ) -> Result<(), Refused> {
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
            self.press_key(named_key(key)?).await?;
            place = self
                .call_on(element, OPTION, Some(Value::from(value)))
                .await?;
            if place.current == before {
                break;
            }
        }
        Err(format!(
            "pressed arrow keys on `{}` but the option `{}` is not selected",
            quoted(selector),
            quoted(value)
        ))
    }

    async fn mouse(
        &self,
        kind: DispatchMouseEventType,
        x: f64,
        y: f64,
        count: Option<i64>,
    ) -> Result<(), Refused> {
        let mut event = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
        if let Some(count) = count {
            event = event
                .button(MouseButton::Left)
                .buttons(1)
                .click_count(count);
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

    async fn mouse_move(&self, x: f64, y: f64) -> Result<(), Refused> {
        self.mouse(DispatchMouseEventType::MouseMoved, x, y, None)
            .await
    }

    /// A move, then `count` press/release pairs with rising click counts:
    /// Chromium turns the second pair into a `dblclick`.
    async fn click(&self, x: f64, y: f64, count: i64) -> Result<(), Refused> {
        self.mouse_move(x, y).await?;
        for n in 1..=count {
            self.mouse(DispatchMouseEventType::MousePressed, x, y, Some(n))
                .await?;
            self.mouse(DispatchMouseEventType::MouseReleased, x, y, Some(n))
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

fn argument(value: Value) -> CallArgument {
    CallArgument {
        value: Some(value),
        ..CallArgument::default()
    }
}

/// Playwright's strict-mode checks for one resolved element.
fn check_target(plan: &Plan, selector: &str, element: &Described) -> Result<(), Refused> {
    let shown = quoted(selector);
    let refuse = |why: &str| Err(format!("`{shown}` {why}; nothing was dispatched"));
    if !element.connected {
        return refuse("is no longer in the page");
    }
    if !element.visible {
        return refuse("is not visible");
    }
    if !element.enabled {
        return refuse("is disabled");
    }
    match plan {
        Plan::Fill(_) | Plan::Type(_) if !element.editable => {
            return refuse("is not an editable field");
        }
        Plan::Check(_)
            if element.tag != "input"
                || !matches!(element.r#type.as_str(), "checkbox" | "radio") =>
        {
            return refuse("is not a checkbox or radio button");
        }
        Plan::Check(false) if element.r#type == "radio" => {
            return refuse("is a radio button, which input cannot uncheck");
        }
        Plan::Select(_) if element.tag != "select" => return refuse("is not a select element"),
        Plan::Select(_) if element.multiple => {
            return refuse("is a multiple-choice select, which this backend does not drive");
        }
        _ => {}
    }
    if plan.needs_pointer() && !element.receives {
        return refuse("is covered by another element at its centre");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use countersign_canonical_policy::{Policy, StaticResolver};
    use serde_json::json;

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
            refusal(json!({"method": "click", "selector": "#x", "arguments": {"button": "right"}})),
            "`click` takes no argument `button`; nothing was dispatched"
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
