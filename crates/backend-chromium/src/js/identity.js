// What an element-bound grant binds about `this`, besides what the
// accessibility tree says: its tag, visible text (bounded here, so the
// answer stays small; the identity folds and cuts it further), and the
// attributes that decide what a click or an input does, URLs resolved to
// absolute ones. Attributes are read with `getAttribute` and the form
// through the control's own `form` property, never through a form's named
// properties, which an `<input name="action">` would shadow.
function () {
  const el = this;
  const tag = el.localName;
  const absolute = (value) => {
    try { return new URL(value, document.baseURI).href; } catch (e) { return value; }
  };
  const attributes = {};
  if (el.hasAttribute("href")) attributes.href = absolute(el.getAttribute("href"));
  if (el.hasAttribute("formaction")) attributes.formaction = absolute(el.getAttribute("formaction"));
  if (el.hasAttribute("name")) attributes.name = el.getAttribute("name");
  const control = ["button", "input", "select", "textarea", "option", "fieldset", "output", "object"].includes(tag);
  const form = tag === "form" ? el : (control && el.form instanceof HTMLFormElement ? el.form : null);
  if (form !== null) {
    const action = form.getAttribute("action");
    // No action, or an empty one, submits to the document's own URL.
    attributes.action = action === null || action === "" ? document.URL : absolute(action);
    const method = (form.getAttribute("method") || "").toLowerCase();
    attributes.method = ["post", "dialog"].includes(method) ? method : "get";
  }
  // The type as the element applies it (a button without one submits).
  if ((tag === "button" || tag === "input") && typeof el.type === "string") {
    attributes.type = el.type;
  } else if (el.hasAttribute("type")) {
    attributes.type = el.getAttribute("type");
  }
  const valued = tag === "button" || tag === "option"
    || (tag === "input" && ["submit", "button", "reset", "image"].includes(el.type));
  if (valued && typeof el.value === "string") attributes.value = el.value;
  const text = String(el.innerText ?? el.textContent ?? "").slice(0, 4096);
  return { tag, text, attributes };
}
