// Whether `node` is `this` or inside it, across shadow roots (user-agent
// ones included): the flat-tree test the hit test's answer needs.
function (node) {
  for (let n = node; n !== null && n !== undefined; n = n.parentNode || n.host || null) {
    if (n === this) return true;
  }
  return false;
}
