// What the protocol's hit test found, seen from the target `this`:
// `inside`, whether `node` is `this` or inside it across shadow roots
// (user-agent ones included), the flat-tree test the hit test's answer
// needs; `frame`, whether `node` is an element that shows another document
// (a frame), whose input would go to that document and not to the page.
// A pseudo-element (`::before`, `::after`, `::marker`: generated content,
// an icon font's glyph) is hit as itself and counts as the element it
// belongs to.
function (node) {
  const hit = (typeof CSSPseudoElement !== "undefined" && node instanceof CSSPseudoElement)
    ? node.element
    : node;
  const frames = ["iframe", "frame", "object", "embed", "fencedframe", "portal"];
  const frame = hit instanceof Element && frames.includes(hit.localName);
  for (let n = hit; n !== null && n !== undefined; n = n.parentNode || n.host || null) {
    if (n === this) return { inside: true, frame };
  }
  return { inside: false, frame };
}
