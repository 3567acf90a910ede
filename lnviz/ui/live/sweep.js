// The ε page's ε: a range input that is the page's only control for it. While it is dragged,
// max |y| and ‖∂L/∂x‖ at that ε are computed here (norms.js: LayerNorm of the page's vector and
// its gradient for the page's fixed upstream gradient g) and shown under the control, and the
// chosen-ε lines of the page's sweep figure (figure.js, kind "sweep") move with it ("lnviz-live"
// events). On release ε goes to Python as a trigger and the page settles on lnviz's numbers.

function sweepNumbers(x, g, eps) {
  const {xHat, grad} = liveLayerNormGrad(x, g, eps);
  let output = 0;
  let norm = 0;
  for (let i = 0; i < x.length; i++) {
    output = Math.max(output, Math.abs(xHat[i]));
    if (Number.isNaN(xHat[i])) output = NaN;
    norm += grad[i] * grad[i];
  }
  return {eps, output, grad: Math.sqrt(norm)};
}

// ε as every ε control labels it (lnviz.ui.params.eps_label): "0", "1e-5", …
function epsText(eps) {
  return eps === 0 ? "0" : `1e${Math.round(Math.log10(eps))}`;
}

function fmtSweep(v) {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return "∞";
  return (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3)
    : v.toPrecision(4)).replace("-", "−");
}

function setupSweep(root) {
  const state = {root, data: null};
  const input = root.querySelector("input[data-control=eps]");
  const chosen = () => state.data.epsilons[controlValue(state, input)];
  state.label = () => {
    input.setAttribute("aria-valuetext", `ε = ${epsText(chosen())}`);
    root.querySelector("[data-show=eps]").textContent = epsText(chosen());
  };
  // The numbers at the chosen ε under the control; the figure follows from "lnviz-live" events.
  state.draw = (shown, from) => {
    root.querySelector("tbody").innerHTML = `<tr><td>${epsText(shown.eps)}</td>`
      + `<td>${fmtSweep(shown.output)}</td><td>${fmtSweep(shown.grad)}</td></tr>`;
    markFrame(root, from);
  };
  state.compute = () => {
    state.last = sweepNumbers(state.x, state.g, chosen());
    return state.last;
  };
  wireControl(root, state, input, () => {
    state.label();
    state.draw(state.compute(), "browser");
    broadcastLive(state, state.last);
    root.querySelector(".lv-status").textContent =
      "The figure below follows in this browser; let go and lnviz recomputes the section.";
  });
  state.update = (data) => {
    state.data = data;
    registerLive(state);
    root.querySelector("[data-help=eps]").title = data.help;
    input.title = data.help;
    state.x = fromBase64(data.x);
    state.g = fromBase64(data.g);
    const [output, grad] = fromBase64(data.server.at);
    input.max = String(data.epsilons.length - 1);
    if (!holding(state, data)) setControl(state, input, data.server.eps);
    state.label();
    state.compute();
    if (controlValue(state, input) === data.server.eps) {
      state.draw({eps: chosen(), output, grad}, "server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag ε and the figure below follows in this browser.";
      window.dispatchEvent(new CustomEvent("lnviz-settled", {detail: {key: data.key}}));
    } else {
      state.draw(state.last, "browser");
      broadcastLive(state, state.last);  // a run moved on from: the figure keeps the control
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-sweep", setupSweep);
}
