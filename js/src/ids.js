// Small helpers shared by the loader and the view.

// A random id: a view's id, a load request's nonce.
export function newId() {
  return Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
}

// A value of a source's `id` column as JSON can carry it (BokehJS may hold int64 ids as BigInt).
export function plainId(value) {
  if (typeof value === "bigint") return Number(value);
  return value === undefined ? null : value;
}
