// Whether `this` has focus: the document's focused element, followed down
// through shadow roots.
function () {
  let active = document.activeElement;
  while (active && active.shadowRoot && active.shadowRoot.activeElement) {
    active = active.shadowRoot.activeElement;
  }
  return active === this;
}
