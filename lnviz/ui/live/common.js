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
  let state = root.__lv;
  if (!state) {
    state = root.__lv = setup(root);
    state.seq = data.seq || 0;  // the last value this session sent: a new panel goes on from it
  }
  state.setTriggerValue = setTriggerValue;
  state.update(data);
}

// Arrow keys change a range input one step per press, and each press is a "change": the panel
// sends the value once the keys have rested this long, not once per press (a burst of presses
// would start a burst of reruns, each interrupting the last).
const KEY_SETTLE_MS = 250;
// How long the panel waits for the server to answer a value it sent before it takes the
// server's data as it comes again (an answer lost with a dropped connection).
const ANSWER_MS = 10000;

// A panel's range input: `onInput` redraws at every step of a drag; letting go (or the arrow
// keys resting) sends the value to Python as the "settle" trigger, numbered (`seq`), and the
// server's data says which number it has answered. Until then, and while the pointer is down or
// the keys are moving the control, new data from the server does not move the control from
// under the learner's hand (the panels ask `holding`): a run started before the last value was
// sent would otherwise put the control back.
function wireControl(root, state, input, onInput) {
  state.exact = state.exact || {};
  input.addEventListener("input", onInput);
  input.addEventListener("keydown", () => { state.keyed = true; });
  input.addEventListener("pointerdown", () => {
    sendKeyed(root, state);  // keys still resting on a control: their value goes first
    state.dragging = true;
    state.keyed = false;
  });
  for (const end of ["pointerup", "pointercancel", "lostpointercapture"]) {
    input.addEventListener(end, () => { state.dragging = false; });
  }
  input.addEventListener("change", () => {
    if (state.keyedInput && state.keyedInput !== input) sendKeyed(root, state);  // another's
    if (!state.keyed) {
      settle(root, state, input);
      return;
    }
    clearTimeout(state.keyTimer);
    state.keyedInput = input;
    state.keyTimer = setTimeout(() => sendKeyed(root, state), KEY_SETTLE_MS);
  });
}

// Send the value the arrow keys left on a control now, if they left one that is still unsent.
function sendKeyed(root, state) {
  clearTimeout(state.keyTimer);
  const input = state.keyedInput;
  state.keyed = false;
  state.keyedInput = null;
  if (input) settle(root, state, input);
}

// Send the control's value to Python, unless it is the value lnviz already shows and no other
// value is on its way (the keys went there and back): then the panel shows lnviz's numbers
// again and nothing reruns. Nothing is sent from a panel no longer on the page.
function settle(root, state, input) {
  if (!root.isConnected) return;
  const control = input.dataset.control;
  const value = controlValue(state, input);
  if (!state.awaiting && state.data && state.data.server[control] === value) {
    state.update(state.data);
    return;
  }
  state.seq += 1;
  state.awaiting = {seq: state.seq, since: performance.now()};
  state.setTriggerValue("settle", {control, value, seq: state.seq});
  root.querySelector(".lv-status").textContent = "Let go: lnviz is recomputing…";
}

// Whether the server's new `data` must leave the controls where the learner has them.
function holding(state, data) {
  if (state.dragging || state.keyedInput) return true;
  if (state.awaiting) {
    const answered = (data.seq || 0) >= state.awaiting.seq;
    if (!answered && performance.now() - state.awaiting.since < ANSWER_MS) return true;
    state.awaiting = null;
  }
  return false;
}

// Move a range input to the server's value. A value between the input's steps (a hand-edited
// link: γ = 0.15 on steps of 0.1) is snapped by the browser; the panel goes on computing with
// the server's own value for as long as the input stays where the browser snapped it.
function setControl(state, input, value) {
  input.value = String(value);
  if (Number(input.value) === value) delete state.exact[input.dataset.control];
  else state.exact[input.dataset.control] = {value, snapped: input.value};
}

// The value a control stands for: the server's, where the input could not hold it exactly.
function controlValue(state, input) {
  const exact = state.exact[input.dataset.control];
  return exact && input.value === exact.snapped ? exact.value : Number(input.value);
}

// γ or β as the panel labels it: one decimal, as on the slider's steps; a value between the
// steps (from a hand-edited link) in full.
function stepLabel(value) {
  const text = Math.round(value * 10) / 10 === value ? value.toFixed(1) : String(value);
  return text.replace("-", "−");
}

// Record on the panel whose numbers it shows ("browser" or "server") and count the frames drawn
// (what the tests and tools/livebench.py read).
function markFrame(root, from) {
  root.dataset.shown = from;
  root.dataset.frame = String(Number(root.dataset.frame || 0) + 1);
}

// The page's figures follow a control (figure.js): the numbers the browser computed go out as an
// "lnviz-live" event under the control's data key, and window.lnvizLive[key] says whether the
// control is still held or waiting for the server's answer (a figure the server sends meanwhile
// may be older) and what it sent last. A control left behind by a rerun is never pending.
function registerLive(state, last) {
  window.lnvizLive = window.lnvizLive || {};
  const before = window.lnvizLive[state.data.key];
  window.lnvizLive[state.data.key] = {
    last: last || (before && before.last),
    pending: () => state.root.isConnected && holding(state, state.data)};
}

function broadcastLive(state, numbers) {
  const last = {key: state.data.key, ...numbers};
  registerLive(state, last);
  window.dispatchEvent(new CustomEvent("lnviz-live", {detail: last}));
}
