// Reports what the strict checks need about `this`, after bringing it into
// view when `options.scroll` is true (performing scrolls, as a user would
// before acting; a snapshot does not, since a scroll is something the page
// sees and may act on). With `options.frames`, when our scroll moved the
// element or the document has animations running, the box is read after
// one animation frame and again after the next: `stable` is whether it
// stayed the same (Playwright's "stable"), and any `scroll` handler the
// page runs for our own scroll has run by then. Otherwise nothing is
// moving by the document's own account and the box is read once; a
// script that moves the element itself is caught by the re-check after
// the pointer move, which comes a frame later. A hidden document gets no
// animation frames, and nothing animates in it: its box is read once.
//
// The action point is the centre of the part of the box inside the
// viewport, as Playwright's clickable point is, rounded down to a whole CSS
// pixel: the backend hit-tests and dispatches at that same pixel.
//
// Runs in an isolated world: the page's scripts cannot replace the
// functions used here, only change the DOM and its styles.
async function (options) {
  const el = this;
  if (!el.isConnected) return { connected: false };
  const before = el.getBoundingClientRect();
  if (options.scroll) el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
  const after = el.getBoundingClientRect();
  const scrolled = before.left !== after.left || before.top !== after.top;
  // A frame, or at most 100 ms: a document hidden while we wait gets no
  // frames, and the wait must end (a timer still runs there).
  const frame = () => new Promise((resolve) => {
    requestAnimationFrame(() => resolve());
    setTimeout(resolve, 100);
  });
  const frames = options.frames && !document.hidden
    && (scrolled || document.getAnimations().some((a) => a.playState === "running"));
  if (frames) await frame();
  const first = el.getBoundingClientRect();
  if (frames) await frame();
  if (!el.isConnected) return { connected: false };
  const rect = el.getBoundingClientRect();
  const stable = first.left === rect.left && first.top === rect.top
    && first.width === rect.width && first.height === rect.height;
  const style = getComputedStyle(el);
  // Effective opacity: the product along the flat tree (slots, shadow
  // hosts), as compositing applies it.
  const up = (n) => n.assignedSlot || n.parentElement
    || (n.parentNode instanceof ShadowRoot ? n.parentNode.host : null);
  let opacity = 1;
  for (let n = el; n !== null; n = up(n)) {
    const own = Number(getComputedStyle(n).opacity);
    opacity *= Number.isFinite(own) ? own : 1;
  }
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
  const x = Math.floor(inView ? (left + right) / 2 : rect.left + rect.width / 2);
  const y = Math.floor(inView ? (top + bottom) / 2 : rect.top + rect.height / 2);
  // `DOM.getNodeForLocation` takes a point of the document, not of the
  // viewport the mouse events use.
  const hit = { x: Math.floor(x + window.scrollX), y: Math.floor(y + window.scrollY) };
  return {
    connected: true, visible, opacity, stable, enabled: !disabled, hit,
    editable: el.isContentEditable || (textInput && !el.readOnly),
    tag, type, checked: el.checked === true, multiple: el.multiple === true,
    x, y,
    bounds: { left: rect.left, top: rect.top, width: rect.width, height: rect.height },
    view, in_view: inView, pixel_ratio: window.devicePixelRatio,
  };
}
