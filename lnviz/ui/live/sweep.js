// The ε page's sweep, live: while ε is dragged the marker moves along max |y| and ‖∂L/∂x‖
// against ε, its values computed here (norms.js: LayerNorm of the page's vector and its
// gradient for the page's fixed upstream gradient g). On release ε goes to Python as a trigger
// and the panel settles on lnviz's numbers.

const W = 320;
const H = 150;

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

function epsText(eps) {
  return eps === 0 ? "0" : `1e${Math.round(Math.log10(eps))}`.replace("-", "−");
}

function fmtSweep(v) {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return "∞";
  return (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3)
    : v.toPrecision(4)).replace("-", "−");
}

/** A log–log panel: the server's curve, and a marker at the chosen ε (at the left edge for
 * ε = 0, which a log axis cannot hold). */
function drawPanel(svg, curveX, curveY, eps, value) {
  const points = [];
  for (let i = 0; i < curveX.length; i++) {
    if (curveY[i] > 0 && Number.isFinite(curveY[i])) points.push([curveX[i], curveY[i]]);
  }
  const logs = points.map(([, v]) => Math.log10(v));
  if (value > 0 && Number.isFinite(value)) logs.push(Math.log10(value));
  let low = Math.min(...logs, 0);
  let high = Math.max(...logs, 0);
  if (high - low < 1) { low -= 0.5; high += 0.5; }
  const [x0, x1] = [Math.log10(curveX[0]), Math.log10(curveX[curveX.length - 1])];
  const px = (e) => (e > 0 ? (Math.log10(e) - x0) / (x1 - x0) * (W - 40) + 36 : 30);
  const py = (v) => H - 4 - (Math.log10(v) - low) / (high - low) * (H - 14);
  const ticks = [];
  for (let k = Math.ceil(x0); k <= x1; k += 3) {
    ticks.push(`<text x="${px(10 ** k)}" y="${H + 14}" text-anchor="middle">1e${k}</text>`);
  }
  for (const k of [Math.ceil(low), Math.floor(high)]) {
    ticks.push(`<text x="28" y="${py(10 ** k) + 3}" text-anchor="end">1e${k}</text>`);
  }
  const onAxis = value > 0 && Number.isFinite(value);
  svg.innerHTML = `<line class="lv-axis" x1="32" x2="${W}" y1="${H}" y2="${H}"/>`
    + `<line class="lv-axis" x1="32" x2="32" y1="0" y2="${H}"/>`
    + `<polyline points="${points.map(([e, v]) => `${px(e).toFixed(1)},${py(v).toFixed(1)}`)
      .join(" ")}"/>`
    + (onAxis ? `<circle class="lv-marker" r="5" cx="${px(eps).toFixed(1)}" `
      + `cy="${py(value).toFixed(1)}"><title>${fmtSweep(value)}</title></circle>`
      : `<text x="${px(eps) + 4}" y="12">${Number.isNaN(value) ? "NaN" : "0"} at ε = `
        + `${epsText(eps)}: off the log axis</text>`)
    + ticks.join("");
}

function setupSweep(root) {
  const state = {root, data: null};
  const input = root.querySelector("input[data-control=eps]");
  const chosen = () => state.data.epsilons[controlValue(state, input)];
  state.label = () => {
    input.setAttribute("aria-valuetext", `ε = ${epsText(chosen())}`);
    root.querySelector("[data-show=eps]").textContent = epsText(chosen());
  };
  state.draw = (shown, from) => {
    const d = state.data;
    drawPanel(root.querySelector("svg[data-panel=output]"), state.sweepEps, state.sweepOutput,
              shown.eps, shown.output);
    drawPanel(root.querySelector("svg[data-panel=grad]"), state.sweepEps, state.sweepGrad,
              shown.eps, shown.grad);
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
  });
  state.update = (data) => {
    state.data = data;
    state.x = fromBase64(data.x);
    state.g = fromBase64(data.g);
    state.sweepEps = fromBase64(data.sweepEps);
    state.sweepOutput = fromBase64(data.sweepOutput);
    state.sweepGrad = fromBase64(data.sweepGrad);
    const [output, grad] = fromBase64(data.server.at);
    input.max = String(data.epsilons.length - 1);
    if (!holding(state, data)) setControl(state, input, data.server.eps);
    state.label();
    state.compute();
    if (controlValue(state, input) === data.server.eps) {
      state.draw({eps: chosen(), output, grad}, "server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag ε and the marker follows in this browser.";
    } else {
      state.draw(state.last, "browser");
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-sweep", setupSweep);
}
