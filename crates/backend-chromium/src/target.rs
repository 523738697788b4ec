//! The strict target: the one rule that decides which element an action
//! acts on and whether the person approving sees it. Performing and
//! snapshots both use it, so the approval page never outlines pixels that
//! belong to another element than the one input would reach.
//!
//! An element passes when the selector matches exactly it, and it is
//! connected, visible (a box, `visibility: visible`, not hidden by
//! `checkVisibility`, and an effective opacity — the product of its own and
//! every flat-tree ancestor's — of at least [`MIN_OPACITY`]), stable (the
//! same box over two animation frames), enabled, suited to the method, and
//! — for every method — nothing else is painted at its action point: the
//! protocol's own hit test (`DOM.getNodeForLocation`, user-agent shadow DOM
//! included, `pointer-events: none` ignored so a box the pointer passes
//! through still counts as painted over) must answer the element or a
//! node inside it. For the pointer methods the same hit test with
//! `pointer-events` honoured must answer it too: the element receives the
//! event. The hit test runs in the browser, not in the page, so a page
//! script cannot answer it.

use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, DescribeNodeParams, GetNodeForLocationParams, ResolveNodeParams,
};
use chromiumoxide::cdp::browser_protocol::page::FrameId;
use chromiumoxide::cdp::js_protocol::runtime::{
    ExecutionContextId, RemoteObjectId, RemoteObjectType,
};
use countersign_approval_core::{BackendError, ElementRef};
use serde::Deserialize;
use serde_json::Value;

use crate::browser::{MainFrame, Tab};
use crate::error::{Refused, protocol, quoted};
use crate::plan::Plan;
use crate::script::{self, Arg, On};

/// An element whose effective opacity (every `opacity` and
/// `filter: opacity()` of it and its ancestors, multiplied) is below this
/// is not visible: a person would not see it, so input must not reach it.
pub const MIN_OPACITY: f64 = 0.1;

/// Of the nine points of a 3×3 grid over a clipped element's box (inside
/// the viewport), at least this many must show the element to the
/// browser's hit test: a clip (`clip-path`, `clip`) that leaves less than
/// about half of the box drawn hides what a person would be approving.
pub const MIN_CLIPPED_POINTS: usize = 5;

/// What `js/describe.js` reads about an element.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Described {
    connected: bool,
    #[serde(default)]
    visible: bool,
    #[serde(default)]
    opacity: f64,
    /// A filter on the element or an ancestor draws through something
    /// this backend cannot judge (`url()`).
    #[serde(default)]
    filter_unknown: bool,
    /// A `clip-path` or `clip` on the element or an ancestor cuts its box.
    #[serde(default)]
    clipped: bool,
    /// A mask on the element or an ancestor: the hit test does not see it.
    #[serde(default)]
    masked: bool,
    /// For a clipped box, the points where the hit test must find it too.
    #[serde(default)]
    grid: Vec<Point>,
    #[serde(default)]
    stable: bool,
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    editable: bool,
    #[serde(default)]
    pub(crate) tag: String,
    #[serde(default)]
    pub(crate) r#type: String,
    #[serde(default)]
    pub(crate) checked: bool,
    #[serde(default)]
    multiple: bool,
    /// The action point, in whole CSS pixels of the layout viewport.
    #[serde(default)]
    pub(crate) x: i64,
    #[serde(default)]
    pub(crate) y: i64,
    /// The action point in whole CSS pixels of the document, as the hit
    /// test takes it.
    #[serde(default)]
    hit: Point,
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

/// A point in whole CSS pixels.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
struct Point {
    x: i64,
    y: i64,
}

/// A box in CSS pixels, relative to the layout viewport.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
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

/// For a `<select>`: the option an action wants, and the one chosen now.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct OptionPlace {
    pub(crate) found: bool,
    pub(crate) current: i64,
    pub(crate) target: i64,
    pub(crate) disabled: bool,
}

/// Whether resolving the target may scroll it into view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scroll {
    /// Scroll it to the viewport's centre first, as performing does.
    IntoView,
    /// Scroll it to the viewport's centre only when no part of it is in
    /// the viewport, as the approval snapshot does: a target below the
    /// fold is shown where it will be acted on, and a page whose target is
    /// in view sees nothing.
    IfOutOfView,
    /// Leave the page as it is, as the re-check before an input event
    /// does (the target must not have moved).
    No,
}

/// The one element an action targets, after every strict check and the
/// method's own checks, none of which dispatches anything.
pub(crate) struct Target {
    /// The element, in `world`.
    pub(crate) element: RemoteObjectId,
    /// The isolated world the element was resolved in.
    pub(crate) world: ExecutionContextId,
    /// The element's node, as the protocol's hit test names it.
    pub(crate) node: BackendNodeId,
    /// The frame whose document the element is in (the main frame).
    pub(crate) frame: FrameId,
    pub(crate) described: Described,
    pub(crate) option: Option<OptionPlace>,
}

impl Target {
    /// Whether the element is already in the state `plan` wants: a user
    /// would not click a box already in that state, nor pick the option
    /// already chosen.
    pub(crate) fn already(&self, plan: &Plan) -> bool {
        match (plan, &self.option) {
            (Plan::Check(wanted), _) => self.described.checked == *wanted,
            (_, Some(place)) => place.current == place.target,
            _ => false,
        }
    }
}

/// Why no target was found: refused (nothing dispatched, the grant given
/// back), or stale (a ref that names no element of the current page: the
/// model must observe again).
#[derive(Debug)]
pub(crate) enum Miss {
    /// [`BackendError::not_dispatched`].
    Refused(Refused),
    /// [`BackendError::stale_target`].
    Stale(Refused),
}

impl From<Refused> for Miss {
    fn from(reason: Refused) -> Self {
        Miss::Refused(reason)
    }
}

impl Miss {
    /// The backend's answer.
    pub(crate) fn into_error(self) -> BackendError {
        match self {
            Miss::Refused(reason) => BackendError::not_dispatched(reason),
            Miss::Stale(reason) => BackendError::stale_target(reason),
        }
    }
}

/// Whether a resolved node is an element still in its document; run in
/// the isolated world, whose `nodeType` and `isConnected` a page cannot
/// replace.
const CONNECTED_ELEMENT: &str =
    "function () { return this.nodeType === Node.ELEMENT_NODE && this.isConnected; }";

/// How a refusal before any input event ends.
pub(crate) const NOTHING: &str = "nothing was dispatched";

/// What the protocol's hit test found at an action point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    /// The element, a node inside it, or a pseudo-element of either.
    Target,
    /// Another document: a node of a child frame's document (a frame in
    /// the page's own renderer), or an element that shows one (`iframe`,
    /// `frame`, `object`, `embed`: a frame from another site, which site
    /// isolation puts in another renderer, is hit as its element). Input
    /// there reaches a document no grant binds.
    Frame,
    /// Something else.
    Other,
}

/// The elements that show another document, whose input goes to it.
const FRAME_OWNERS: &[&str] = &[
    "iframe",
    "frame",
    "object",
    "embed",
    "fencedframe",
    "portal",
];

/// What `js/contains.js` answers about a hit node.
#[derive(Debug, Deserialize)]
struct Contains {
    inside: bool,
    frame: bool,
}

impl Tab {
    /// The strict target (see the module documentation) and the method's
    /// own checks, in `frame`'s DOM through a fresh isolated world.
    /// Dispatches nothing; scrolls only as `scroll` says.
    /// Performing and snapshots share this one rule.
    pub(crate) async fn strict_target(
        &self,
        frame: &MainFrame,
        plan: &Plan,
        selector: &str,
        scroll: Scroll,
    ) -> Result<Target, Miss> {
        let world = self
            .isolated_world(frame.id.clone())
            .await
            .map_err(|e| e.to_string())?;
        let element = match ElementRef::from_selector(selector) {
            None => self.resolve(world, selector).await?,
            Some(Ok(element_ref)) => self.resolve_ref(world, frame, element_ref).await?,
            Some(Err(malformed)) => {
                return Err(Miss::Refused(format!(
                    "`{}` does not name a ref: {malformed}; nothing was dispatched",
                    quoted(selector)
                )));
            }
        };
        let node = self.backend_node(&element).await?;
        let described = self.describe(&element, scroll, true).await?;
        check_target(plan, selector, &described, NOTHING)?;
        let target = Target {
            element,
            world,
            node,
            frame: frame.id.clone(),
            option: None,
            described,
        };
        self.check_hits(&target, plan, selector, NOTHING).await?;

        // Method-specific checks that dispatch nothing.
        let option = match plan {
            Plan::Select(value) => {
                let place: OptionPlace = self
                    .call_value(
                        script::OPTION,
                        On::Object(&target.element),
                        vec![Arg::Value(Value::from(value.as_str()))],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                if !place.found {
                    return Err(Miss::Refused(format!(
                        "`{}` has no option with value or label `{}`; nothing was dispatched",
                        quoted(selector),
                        quoted(value)
                    )));
                }
                if place.disabled {
                    return Err(Miss::Refused(format!(
                        "the option `{}` of `{}` is disabled; nothing was dispatched",
                        quoted(value),
                        quoted(selector)
                    )));
                }
                Some(place)
            }
            _ => None,
        };
        Ok(Target { option, ..target })
    }

    /// The same rule again, right before an input event, for the target
    /// found before: it must still pass, at the same action point with the
    /// same box, and the hit test there must still answer it. `refusal`
    /// ends the message (what was, or was not, dispatched).
    pub(crate) async fn recheck(
        &self,
        target: &Target,
        plan: &Plan,
        selector: &str,
        refusal: &str,
    ) -> Result<(), Refused> {
        let again = self.describe(&target.element, Scroll::No, false).await?;
        check_target(plan, selector, &again, refusal)?;
        let before = &target.described;
        if (again.x, again.y, again.hit) != (before.x, before.y, before.hit)
            || again.bounds != before.bounds
        {
            return Err(format!(
                "`{}` moved while the action was being performed; {refusal}",
                quoted(selector)
            ));
        }
        self.check_hits(target, plan, selector, refusal).await
    }

    /// Right before a key event: `target` must still have focus, so the
    /// key reaches it and nothing the page moved focus to.
    pub(crate) async fn check_focused(
        &self,
        target: &Target,
        selector: &str,
        refusal: &str,
    ) -> Result<(), Refused> {
        let focused: bool = self
            .call_value(script::FOCUSED, On::Object(&target.element), Vec::new())
            .await
            .map_err(|e| e.to_string())?;
        if focused {
            Ok(())
        } else {
            Err(format!(
                "`{}` lost focus while the action was being performed; {refusal}",
                quoted(selector)
            ))
        }
    }

    /// The protocol's hit test at the target's action point: nothing else
    /// painted there (for every method), and the target receiving pointer
    /// events there (for the pointer methods).
    async fn check_hits(
        &self,
        target: &Target,
        plan: &Plan,
        selector: &str,
        outcome: &str,
    ) -> Result<(), Refused> {
        let shown = quoted(selector);
        let Point { x, y } = target.described.hit;
        if !target.described.in_view {
            return Err(format!("`{shown}` is outside the viewport; {outcome}"));
        }
        let frame = || {
            format!(
                "`{shown}` shows another document (a frame) at its centre, which no grant binds; {outcome}"
            )
        };
        if plan.needs_pointer() {
            match self.hit(target, x, y, false).await? {
                Hit::Target => {}
                Hit::Frame => return Err(frame()),
                Hit::Other => {
                    return Err(format!(
                        "`{shown}` is covered by another element at its centre; {outcome}"
                    ));
                }
            }
        }
        match self.hit(target, x, y, true).await? {
            Hit::Target => {}
            Hit::Frame => return Err(frame()),
            Hit::Other => {
                return Err(format!(
                    "`{shown}` is painted over by another element at its centre; {outcome}"
                ));
            }
        }
        // A clipped box: the hit test follows the clip, so it tells how
        // much of the box is drawn.
        if target.described.clipped {
            let mut shown_points = 0;
            for point in &target.described.grid {
                if self.hit(target, point.x, point.y, true).await? == Hit::Target {
                    shown_points += 1;
                }
            }
            if shown_points < MIN_CLIPPED_POINTS {
                return Err(format!(
                    "`{shown}` is clipped so that only {shown_points} of 9 points of its box are drawn, \
                     fewer than {MIN_CLIPPED_POINTS}; {outcome}"
                ));
            }
        }
        Ok(())
    }

    /// What `DOM.getNodeForLocation` finds at (`x`, `y`), with user-agent
    /// shadow DOM, and with `pointer-events: none` ignored when
    /// `painted` (then whatever is drawn on top counts, whether or not the
    /// pointer would pass through it).
    async fn hit(&self, target: &Target, x: i64, y: i64, painted: bool) -> Result<Hit, Refused> {
        let params = GetNodeForLocationParams::builder()
            .x(x)
            .y(y)
            .include_user_agent_shadow_dom(true)
            .ignore_pointer_events_none(painted)
            .build()
            .map_err(|e| protocol("DOM.getNodeForLocation", e))?;
        let found = self
            .inner
            .page
            .execute(params)
            .await
            .map_err(|e| protocol("DOM.getNodeForLocation", e))?;
        // A node of a child frame's document (same site, same renderer).
        if found.result.frame_id != target.frame {
            return Ok(Hit::Frame);
        }
        let hit = found.result.backend_node_id;
        if hit == target.node {
            return Ok(if FRAME_OWNERS.contains(&target.described.tag.as_str()) {
                Hit::Frame
            } else {
                Hit::Target
            });
        }
        // Another node: inside the target (its text's element, a child, a
        // node of its shadow tree, a pseudo-element) or not, and whether it
        // shows a frame. A node that does not resolve in the target's world
        // is not inside it.
        let resolve = ResolveNodeParams {
            backend_node_id: Some(hit),
            execution_context_id: Some(target.world),
            ..ResolveNodeParams::default()
        };
        let Ok(resolved) = self.inner.page.execute(resolve).await else {
            return Ok(Hit::Other);
        };
        let Some(node) = resolved.result.object.object_id.clone() else {
            return Ok(Hit::Other);
        };
        let contains: Contains = self
            .call_value(
                script::CONTAINS,
                On::Object(&target.element),
                vec![Arg::Object(&node)],
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(match contains {
            Contains { frame: true, .. } => Hit::Frame,
            Contains { inside: true, .. } => Hit::Target,
            Contains { inside: false, .. } => Hit::Other,
        })
    }

    /// The element's facts (`js/describe.js`), after a scroll into view
    /// as `scroll` says, over two animation frames with `frames`.
    async fn describe(
        &self,
        element: &RemoteObjectId,
        scroll: Scroll,
        frames: bool,
    ) -> Result<Described, Refused> {
        let scroll = match scroll {
            Scroll::IntoView => "always",
            Scroll::IfOutOfView => "out-of-view",
            Scroll::No => "no",
        };
        let options = serde_json::json!({ "scroll": scroll, "frames": frames });
        self.call_value(
            script::DESCRIBE,
            On::Object(element),
            vec![Arg::Value(options)],
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// The element's backend node id (`DOM.describeNode`).
    async fn backend_node(&self, element: &RemoteObjectId) -> Result<BackendNodeId, Refused> {
        let params = DescribeNodeParams {
            object_id: Some(element.clone()),
            ..DescribeNodeParams::default()
        };
        let described = self
            .inner
            .page
            .execute(params)
            .await
            .map_err(|e| protocol("DOM.describeNode", e))?;
        Ok(described.result.node.backend_node_id)
    }

    /// The element `element_ref` was given to when the tab's current
    /// document was observed, in `world`: through the tab's ref table to
    /// its backend node id, then `DOM.resolveNode`. Never another element:
    /// a ref of another page, one never handed out, or a node no longer in
    /// the document is [`Miss::Stale`].
    async fn resolve_ref(
        &self,
        world: ExecutionContextId,
        frame: &MainFrame,
        element_ref: ElementRef,
    ) -> Result<RemoteObjectId, Miss> {
        let node = self
            .inner
            .refs
            .lock()
            .await
            .node(element_ref, &frame.revision)
            .map_err(Miss::Stale)?;
        let gone = || {
            Miss::Stale(format!(
                "`{element_ref}` is no longer in the page; observe again"
            ))
        };
        let resolve = ResolveNodeParams {
            backend_node_id: Some(node),
            execution_context_id: Some(world),
            ..ResolveNodeParams::default()
        };
        let resolved = self.inner.page.execute(resolve).await.map_err(|_| gone())?;
        let Some(element) = resolved.result.object.object_id.clone() else {
            return Err(gone());
        };
        let connected: bool = self
            .call_value(CONNECTED_ELEMENT, On::Object(&element), Vec::new())
            .await
            .map_err(|e| e.to_string())?;
        if connected { Ok(element) } else { Err(gone()) }
    }

    /// The selector's one element in `world`, or why there is not one.
    async fn resolve(
        &self,
        world: ExecutionContextId,
        selector: &str,
    ) -> Result<RemoteObjectId, Refused> {
        let object = self
            .call_function(
                script::RESOLVE,
                On::World(world),
                vec![Arg::Value(Value::from(selector))],
                false,
            )
            .await
            .map_err(|e| e.to_string())?;
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
}

/// Playwright's actionability checks that need no hit test, for one
/// resolved element, plus the opacity threshold.
fn check_target(
    plan: &Plan,
    selector: &str,
    element: &Described,
    outcome: &str,
) -> Result<(), Refused> {
    let shown = quoted(selector);
    let refuse = |why: &str| Err(format!("`{shown}` {why}; {outcome}"));
    if !element.connected {
        return refuse("is no longer in the page");
    }
    if !element.visible {
        return refuse("is not visible");
    }
    if element.opacity.is_nan() || element.opacity < MIN_OPACITY {
        return refuse(&format!(
            "is not visible (its effective opacity, with `filter: opacity()`, is below {MIN_OPACITY})"
        ));
    }
    if element.filter_unknown {
        return refuse("is drawn through a filter this backend cannot judge (`filter: url()`)");
    }
    if element.masked {
        return refuse(
            "is masked (`mask`), which may hide it from view and which the browser's hit test does not see",
        );
    }
    if !element.stable {
        return refuse("is not stable (its box moved between two animation frames)");
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
    Ok(())
}
