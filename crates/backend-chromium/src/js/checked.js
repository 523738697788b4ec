// Reads `checked`.
function () { return this.checked === true; }
