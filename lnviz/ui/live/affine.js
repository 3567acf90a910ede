// Scale and shift's γ and β: range inputs that are the page's only controls for them. While
// one moves, y = γ·x̂ + β is recomputed here (x̂: liveNormalize's LayerNorm of the page's
// samples, one row), and its histogram, mean and std go out to the page's figure (figure.js,
// kind "affine") as an "lnviz-live" event; let go, the value goes to Python as a trigger and
// the figure settles on lnviz's histogram and statistics. The arithmetic (affineNumbers) is in
// plots.js, beside the figure's own, where Node's tests check both against lnviz.

function setupAffine(root) {
  const state = {root, data: null};
  const inputs = [...root.querySelectorAll("input[type=range]")];
  const value = (name) => controlValue(state, root.querySelector(`input[data-control=${name}]`));
  state.label = () => {
    for (const input of inputs) {
      const name = input.dataset.control;
      const text = stepLabel(value(name));
      input.setAttribute("aria-valuetext", `${name === "gamma" ? "γ" : "β"} = ${text}`);
      root.querySelector(`[data-show=${name}]`).textContent = text;
    }
  };
  state.compute = () => {
    state.last = affineNumbers(state.x, value("gamma"), value("beta"), state.data);
    return state.last;
  };
  const broadcast = () => {
    broadcastLive(state, state.last);
    markFrame(root, "browser");
  };
  for (const input of inputs) {
    wireControl(root, state, input, () => {
      state.label();
      state.compute();
      broadcast();
      root.querySelector(".lv-status").textContent =
        "The histogram below follows in this browser; let go and lnviz recomputes it.";
    });
  }
  state.update = (data) => {
    if (state.data === null || data.x !== state.data.x) state.x = fromBase64(data.x);
    state.data = data;
    registerLive(state);
    for (const [name, text] of Object.entries(data.help)) {
      root.querySelector(`[data-help=${name}]`).title = text;
      root.querySelector(`input[data-control=${name}]`).title = text;
    }
    const server = data.server;
    if (!holding(state, data)) {
      setControl(state, root.querySelector("input[data-control=gamma]"), server.gamma);
      setControl(state, root.querySelector("input[data-control=beta]"), server.beta);
    }
    state.label();
    state.compute();
    if (value("gamma") === server.gamma && value("beta") === server.beta) {
      markFrame(root, "server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag γ or β and the histogram below follows in this browser.";
      window.dispatchEvent(new CustomEvent("lnviz-settled", {detail: {key: data.key}}));
    } else {
      broadcast();  // a run the learner has moved on from: the figure keeps the controls
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-affine", setupAffine);
}
