// Reports what the strict checks need about `this`, after bringing it into
// view: always when `options.scroll` is "always" (performing, as a user
// would before acting), only when no part of it is in the viewport when it
// is "out-of-view" (the approval snapshot: a target below the fold is
// shown where it will be acted on, and a page whose target is in view
// sees no scroll at all). A page that acts on our scroll is judged after
// it, by what it shows then. With `options.frames`, when our scroll moved the
// element or the document has animations running, the box is read after
// one animation frame and again after the next: `stable` is whether it
// stayed the same (Playwright's "stable"), and any `scroll` handler the
// page runs for our own scroll has run by then. Otherwise nothing is
// moving by the document's own account and the box is read once; a
// script that moves the element itself is caught by the re-check after
// the pointer move, which comes a frame later. A hidden document gets no
// animation frames, and nothing animates in it: its box is read once.
//
// The action point is the centre of the part inside the viewport of the
// element's first box that has one (its line boxes, for an inline element
// wrapped onto several lines), as Playwright's clickable point is taken
// from content quads, rounded down to a whole CSS pixel: the backend
// hit-tests and dispatches at that same pixel.
//
// Runs in an isolated world: the page's scripts cannot replace the
// functions used here, only change the DOM and its styles.
async function (options) {
  const el = this;
  if (!el.isConnected) return { connected: false };
  const before = el.getBoundingClientRect();
  const viewport = () => {
    const vv = window.visualViewport;
    const root = document.documentElement;
    return vv
      ? { left: vv.offsetLeft, top: vv.offsetTop, width: vv.width, height: vv.height, scale: vv.scale }
      : { left: 0, top: 0, width: root.clientWidth, height: root.clientHeight, scale: 1 };
  };
  // The part of box `r` inside viewport `v` (empty when none is).
  const clip = (r, v) => ({
    left: Math.max(r.left, v.left),
    top: Math.max(r.top, v.top),
    right: Math.min(r.right, v.left + v.width),
    bottom: Math.min(r.bottom, v.top + v.height),
  });
  // The element's own boxes, one per line box for an inline element
  // wrapped onto several lines (what the protocol's content quads are):
  // the part inside viewport `v` of the first of them that has one.
  const firstLineIn = (v) => Array.from(el.getClientRects())
    .filter((r) => r.width > 0 && r.height > 0)
    .map((r) => clip(r, v))
    .find((c) => c.right > c.left && c.bottom > c.top);
  const scroll = options.scroll === "always"
    || (options.scroll === "out-of-view" && firstLineIn(viewport()) === undefined);
  if (scroll) el.scrollIntoView({ block: "center", inline: "center", behavior: "instant" });
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
  // Along the flat tree (slots, shadow hosts), as compositing applies it:
  // the effective opacity, the product of every `opacity` and every
  // `filter: opacity()`; whether a filter draws through something we
  // cannot judge (`url()`, an SVG filter); whether a clip (`clip-path`,
  // `clip`) or a mask cuts the box.
  const up = (n) => n.assignedSlot || n.parentElement
    || (n.parentNode instanceof ShadowRoot ? n.parentNode.host : null);
  const unit = (value) => Number.isFinite(value) ? Math.min(Math.max(value, 0), 1) : 1;
  let opacity = 1;
  let filterUnknown = false;
  let clipped = false;
  let masked = false;
  for (let n = el; n !== null; n = up(n)) {
    const s = getComputedStyle(n);
    opacity *= unit(Number(s.opacity));
    const filter = s.filter || "none";
    for (const m of filter.matchAll(/opacity\(\s*([^)%\s]*)\s*(%?)\s*\)/g)) {
      opacity *= unit(m[1] === "" ? 1 : Number(m[1]) / (m[2] === "%" ? 100 : 1));
    }
    if (filter.includes("url(")) filterUnknown = true;
    if ((s.clipPath || "none") !== "none") clipped = true;
    if (["absolute", "fixed"].includes(s.position) && (s.clip || "auto") !== "auto") clipped = true;
    for (const mask of [s.maskImage, s.webkitMaskImage, s.maskBorderSource, s.webkitMaskBoxImageSource]) {
      if (mask !== undefined && mask !== "" && mask !== "none") masked = true;
    }
  }
  // `content-visibility: hidden` on an ancestor skips the element (which
  // `checkVisibility` sees); on the element itself, its box is drawn empty.
  const visible = rect.width > 0 && rect.height > 0 && style.visibility === "visible"
    && style.contentVisibility !== "hidden"
    && el.checkVisibility({ visibilityProperty: true, checkVisibilityCSS: true });
  const tag = el.localName;
  const type = tag === "input" ? (el.getAttribute("type") || "text").toLowerCase() : "";
  const notText = ["checkbox", "radio", "button", "submit", "reset", "file", "image", "color", "range", "hidden"];
  const textInput = tag === "textarea" || (tag === "input" && !notText.includes(type));
  const disabled = el.matches(":disabled") || el.getAttribute("aria-disabled") === "true";
  const view = viewport();
  const { left, top, right, bottom } = clip(rect, view);
  // The centre of the bounding box of a wrapped link can fall between its
  // lines, on its parent: the action point is the centre of its first line
  // box with a part inside the viewport.
  const line = firstLineIn(view);
  const inView = line !== undefined;
  const x = Math.floor(inView ? (line.left + line.right) / 2 : rect.left + rect.width / 2);
  const y = Math.floor(inView ? (line.top + line.bottom) / 2 : rect.top + rect.height / 2);
  // `DOM.getNodeForLocation` takes a point of the document, not of the
  // viewport the mouse events use.
  const hit = { x: Math.floor(x + window.scrollX), y: Math.floor(y + window.scrollY) };
  // For a clipped box, the points of a 3x3 grid over its part inside the
  // viewport, where the hit test must find it too (see `target.rs`).
  const grid = [];
  if (clipped && inView) {
    for (const fy of [1, 3, 5]) {
      for (const fx of [1, 3, 5]) {
        grid.push({
          x: Math.floor(left + (right - left) * fx / 6 + window.scrollX),
          y: Math.floor(top + (bottom - top) * fy / 6 + window.scrollY),
        });
      }
    }
  }
  return {
    connected: true, visible, opacity, filter_unknown: filterUnknown, clipped, masked, grid,
    stable, enabled: !disabled, hit,
    editable: el.isContentEditable || (textInput && !el.readOnly),
    tag, type, checked: el.checked === true, multiple: el.multiple === true,
    x, y,
    bounds: { left: rect.left, top: rect.top, width: rect.width, height: rect.height },
    view, in_view: inView, pixel_ratio: window.devicePixelRatio,
  };
}
