// For a `<select>`: where the option with `value` is (else the first one
// labelled `value`, as Playwright's selectOption matches) and whether it
// can be chosen.
function (value) {
  const options = Array.from(this.options);
  let target = options.findIndex(o => o.value === value);
  if (target < 0) target = options.findIndex(o => o.label === value);
  if (target < 0) return { found: false, current: this.selectedIndex, target: -1, disabled: false };
  const option = options[target];
  const group = option.parentElement && option.parentElement.localName === "optgroup" ? option.parentElement : null;
  return { found: true, current: this.selectedIndex, target, disabled: option.disabled || (group !== null && group.disabled) };
}
