// What an element-bound grant binds about `this`, besides what the
// accessibility tree says: its tag, visible text (bounded here, so the
// answer stays small; the identity folds and cuts it further), the
// attributes that decide what a click or an input does, URLs resolved to
// absolute ones, and, when the input `activation` describes would submit
// a form, the form data set that submit would send.
//
// `activation` is how the action's input may activate elements:
// "pointer" (a click), "enter" (an Enter key), "space" (a Space key) or
// null (no activation: hover, focus, fill, select).
//
// Attributes and form properties are read through this world's own
// prototypes, never through the element: a form's named properties
// (`<input name="action">`, `<input name="elements">`) shadow its own.
function (activation) {
  const el = this;
  const tag = el.localName;
  const attr = (node, name) => Element.prototype.getAttribute.call(node, name);
  const has = (node, name) => Element.prototype.hasAttribute.call(node, name);
  const formOf = (node) => {
    for (let p = Object.getPrototypeOf(node); p !== null; p = Object.getPrototypeOf(p)) {
      const own = Object.getOwnPropertyDescriptor(p, "form");
      if (own && own.get) {
        const form = own.get.call(node);
        return form instanceof HTMLFormElement ? form : null;
      }
    }
    return null;
  };
  const elementsOf = (form) =>
    Object.getOwnPropertyDescriptor(HTMLFormElement.prototype, "elements").get.call(form);
  const absolute = (value) => {
    try { return new URL(value, document.baseURI).href; } catch (e) { return value; }
  };
  const attributes = {};
  if (has(el, "href")) attributes.href = absolute(attr(el, "href"));
  if (has(el, "formaction")) attributes.formaction = absolute(attr(el, "formaction"));
  if (has(el, "formmethod")) attributes.formmethod = (attr(el, "formmethod") || "").toLowerCase();
  if (has(el, "name")) attributes.name = attr(el, "name");
  const control = ["button", "input", "select", "textarea", "option", "fieldset", "output", "object"].includes(tag);
  const form = tag === "form" ? el : (control ? formOf(el) : null);
  if (form !== null) {
    const action = attr(form, "action");
    // No action, or an empty one, submits to the document's own URL.
    attributes.action = action === null || action === "" ? document.URL : absolute(action);
    const method = (attr(form, "method") || "").toLowerCase();
    attributes.method = ["post", "dialog"].includes(method) ? method : "get";
  }
  // The type as the element applies it (a button without one submits).
  if ((tag === "button" || tag === "input") && typeof el.type === "string") {
    attributes.type = el.type;
  } else if (has(el, "type")) {
    attributes.type = attr(el, "type");
  }
  const valued = tag === "button" || tag === "option"
    || (tag === "input" && ["submit", "button", "reset", "image"].includes(el.type));
  if (valued && typeof el.value === "string") attributes.value = el.value;
  const text = String(el.innerText ?? el.textContent ?? "").slice(0, 4096);
  return { tag, text, attributes, submission: submission() };

  // The submit `activation` would cause, as HTML defines it: a click, Enter
  // or Space on a submit button (or inside one, or on a label of one)
  // submits its form with it as the submitter; Enter in an input submits
  // its form implicitly, through the form's default button (the first
  // submit button), or with none when the form has no submit button and at
  // most one field that blocks implicit submission.
  function submission() {
    if (activation === null) return null;
    const submits = (node) => node instanceof Element
      && ((node.localName === "button" && node.type === "submit")
        || (node.localName === "input" && ["submit", "image"].includes(node.type)));
    let submitter = null;
    for (let n = el; n !== null && submitter === null; n = n.parentElement) {
      if (submits(n)) submitter = n;
      else if (n.localName === "label" && submits(n.control)) submitter = n.control;
    }
    let owner = submitter !== null ? formOf(submitter) : null;
    if (owner === null && activation === "enter" && tag === "input" && !submits(el)) {
      owner = formOf(el);
      if (owner !== null) {
        const controls = Array.from(elementsOf(owner));
        submitter = controls.find(submits) || null;
        const blocking = ["text", "search", "url", "tel", "email", "password", "date", "month",
          "week", "time", "datetime-local", "number"];
        if (submitter === null
            && controls.filter((c) => c.localName === "input" && blocking.includes(c.type)).length > 1) {
          return null;
        }
        if (submitter !== null && submitter.matches(":disabled")) return null;
      }
    }
    if (owner === null) return null;
    const form = attr(owner, "id") || attr(owner, "name") || attributes.action || document.URL;
    return { form, ...entries(owner, submitter) };
  }

  // The entry list HTML's "constructing the entry list" builds, in tree
  // order: `entries`, at most 64 of them, each value cut past 8192
  // characters (the bounds are 64 entries and 8 KiB, which the caller
  // checks), and `total`, how many there are. Passwords are marked so the
  // caller hashes them; files are named with their size.
  function entries(owner, submitter) {
    const list = [];
    let total = 0;
    const push = (entry) => { total += 1; if (list.length < 64) list.push(entry); };
    const cut = (value) => String(value).slice(0, 8193);
    for (const field of Array.from(elementsOf(owner))) {
      const kind = field.localName;
      const type = kind === "input" || kind === "button" ? String(field.type) : "";
      if (field.closest("datalist") !== null || field.matches(":disabled")) continue;
      if (["fieldset", "output", "object"].includes(kind)) continue;
      const button = kind === "button" || (kind === "input" && ["submit", "image", "reset", "button"].includes(type));
      if (button && field !== submitter) continue;
      if (kind === "input" && ["checkbox", "radio"].includes(type) && !field.checked) continue;
      const name = has(field, "name") ? attr(field, "name") : "";
      if (kind === "input" && type === "image") {
        // The coordinates of the click, which depend on the point, not on
        // what the person approved: bound by name only.
        push({ kind: "text", name: name === "" ? "x" : name + ".x", value: "" });
        push({ kind: "text", name: name === "" ? "y" : name + ".y", value: "" });
        continue;
      }
      if (name === "") continue;
      if (kind.includes("-")) {
        // A form-associated custom element (the only listed element whose
        // name has a hyphen): its value is private to it.
        return { unreadable: name, entries: [], total: 0 };
      }
      if (kind === "select") {
        for (const option of Array.from(field.options)) {
          if (option.selected && !option.disabled) push({ kind: "text", name, value: cut(option.value) });
        }
      } else if (kind === "input" && ["checkbox", "radio"].includes(type)) {
        push({ kind: "text", name, value: cut(has(field, "value") ? attr(field, "value") : "on") });
      } else if (kind === "input" && type === "file") {
        const files = Array.from(field.files || []);
        if (files.length === 0) push({ kind: "file", name, value: "", size: 0 });
        for (const file of files) push({ kind: "file", name, value: cut(file.name), size: file.size });
      } else if (kind === "input" && type === "hidden" && name.toLowerCase() === "_charset_") {
        push({ kind: "text", name, value: document.characterSet });
      } else if (kind === "input" && type === "password") {
        push({ kind: "password", name, value: cut(field.value) });
      } else {
        push({ kind: "text", name, value: cut(field.value) });
      }
      const dirname = has(field, "dirname") ? attr(field, "dirname") : "";
      if (dirname !== "" && (kind === "textarea" || (kind === "input" && ["text", "search"].includes(type)))) {
        push({ kind: "text", name: dirname, value: getComputedStyle(field).direction === "rtl" ? "rtl" : "ltr" });
      }
    }
    return { entries: list, total };
  }
}
