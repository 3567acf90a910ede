// Shared by the live panels: the server sends numbers as base64 little-endian bytes (exact, and
// NaN and ±inf survive, which JSON cannot carry): float64 by default, or float32 (`type`) for
// inputs that are float32 already and large enough for the halved size to matter.

function fromBase64(text, type = Float64Array) {
  const bytes = Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
  return new type(bytes.buffer);
}

// A panel's entry point (each panel's default export calls it): the panel's state is set up
// once per root element and kept across reruns; every rerun hands it the server's new data.
function mountPanel(component, selector, setup) {
  const {data, parentElement, setTriggerValue} = component;
  const root = parentElement.querySelector(selector);
  if (!root || !data) return;
  const state = root.__lv || (root.__lv = setup(root));
  state.setTriggerValue = setTriggerValue;
  state.update(data);
}

// A panel's range input: `onInput` redraws at every step of a drag; letting go sends the value
// to Python as the "settle" trigger; while the pointer is down, new data from the server does
// not move the control from under the learner's hand (the panels read `state.dragging`).
function wireControl(root, state, input, onInput) {
  input.addEventListener("input", onInput);
  input.addEventListener("change", () => {
    state.setTriggerValue("settle", {control: input.dataset.control, value: Number(input.value)});
    root.querySelector(".lv-status").textContent = "Let go: lnviz is recomputing…";
  });
  input.addEventListener("pointerdown", () => { state.dragging = true; });
  input.addEventListener("pointerup", () => { state.dragging = false; });
}

// Record on the panel whose numbers it shows ("browser" or "server") and count the frames drawn
// (what the tests and tools/livebench.py read).
function markFrame(root, from) {
  root.dataset.shown = from;
  root.dataset.frame = String(Number(root.dataset.frame || 0) + 1);
}
