// Shared by the live panels: the server sends numbers as base64 float64 bytes (exact, and NaN and
// ±inf survive, which JSON cannot carry).

function fromBase64(text) {
  const bytes = Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
  return new Float64Array(bytes.buffer);
}
