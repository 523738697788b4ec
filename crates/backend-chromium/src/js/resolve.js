// Finds the selector's elements: the element when there is exactly one,
// else how many matched, else "invalid".
function (selector) {
  let found;
  try { found = document.querySelectorAll(selector); } catch (e) { return "invalid"; }
  return found.length === 1 ? found[0] : found.length;
}
