// BatchNorm vs LayerNorm's batch size: a range input that is the page's only control for it.
// While it is dragged the fixed sample's outputs in every re-drawn batch are computed here
// (norms.js: BatchNorm over the batch the re-draw's mates build, LayerNorm of the sample alone)
// and go out to the page's re-draws figure (figure.js, kind "redraws") as "lnviz-live" events,
// with their largest changes under the control; on release the size goes to Python as a trigger
// and the page settles on lnviz's numbers.

/** max over features of (max − min over re-draws); `values` is (redraws, C) row-major. */
function largestChange(values, redraws, features) {
  let widest = 0;
  for (let c = 0; c < features; c++) {
    let low = Infinity;
    let high = -Infinity;
    for (let r = 0; r < redraws; r++) {
      low = Math.min(low, values[r * features + c]);
      high = Math.max(high, values[r * features + c]);
    }
    widest = Math.max(widest, high - low);
  }
  return widest;
}

/** The fixed sample's outputs at batch size `size`: BatchNorm sees the re-drawn batches side by
 * side as one (size, redraws·C) table, one μ and σ per column, as lnviz's batch_dependence does. */
function batchNumbers(state, size) {
  const {redraws: R, features: C, eps} = state.data;
  const mates = state.mates;
  const perMate = state.data.mateCount * C; // one re-draw's mates
  const ln = liveNormalize({x: state.sample, shape: [1, C], layout: "NC", norm: "LayerNorm",
                           dims: 1, eps, gamma: 1, beta: 0}).y;
  const layerNorm = new Float64Array(R * C);
  for (let r = 0; r < R; r++) layerNorm.set(ln, r * C);
  const numbers = {batch: size, layerNorm, lnSpread: largestChange(layerNorm, R, C)};
  if (size < 2) return {...numbers, batchNorm: null, bnSpread: NaN};
  const width = R * C;
  const x = new Float64Array(size * width);
  for (let r = 0; r < R; r++) {
    for (let c = 0; c < C; c++) {
      x[r * C + c] = state.sample[c];
      for (let j = 1; j < size; j++) x[j * width + r * C + c] = mates[r * perMate + (j - 1) * C + c];
    }
  }
  const y = liveNormalize({x, shape: [size, width], layout: "NC", norm: "BatchNorm",
                          training: true, eps, gamma: 1, beta: 0, mask: null}).y;
  const batchNorm = y.slice(0, width);
  return {...numbers, batchNorm, bnSpread: largestChange(batchNorm, R, C)};
}

/** Python's format(v, ".3g"), as the page's metrics print their numbers. */
function fmtG(v) {
  if (Number.isNaN(v)) return "nan";
  if (v === 0) return "0";
  const exponent = Number(v.toExponential(2).split("e")[1]);
  const text = exponent < -4 || exponent >= 3
    ? v.toExponential(2).replace(/\.?0+e/, "e").replace(/e([+-])(\d)$/, "e$10$2")
    : v.toFixed(2 - exponent).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
  return text.replace("-", "−");
}

// Under the control: the refusal at a batch of one (while the browser's numbers are shown: once
// settled, the page says it under the figure) and the largest changes.
function drawBatches(root, state, shown, from = "browser") {
  const d = state.data;
  const refused = shown.batchNorm === null;
  const notice = root.querySelector(".lv-refusal");
  notice.hidden = !refused || from === "server";
  notice.textContent = refused
    ? `lnviz: ${d.refusal}. torch.nn.functional.batch_norm: ${d.torchRefusal}. LayerNorm is `
      + "happy with a batch of one: it never looks at the other samples." : "";
  root.querySelector("tbody").innerHTML = `<tr><td>${shown.batch}</td>`
    + `<td>${refused ? "refused" : fmtG(shown.bnSpread)}</td><td>${fmtG(shown.lnSpread)}</td></tr>`;
}

function setupBatches(root) {
  const state = {root, data: null};
  const input = root.querySelector("input[data-control=batch]");
  // what the views show: the control's value, kept to the sizes the mates can build (a page
  // could report another; the server corrects it on release)
  const chosen = () => Math.min(Math.max(Math.round(controlValue(state, input)) || 1, 1),
                                state.data.maxBatch);
  state.label = () => {
    input.setAttribute("aria-valuetext", `batch size = ${chosen()}`);
    root.querySelector("[data-show=batch]").textContent = String(chosen());
  };
  const mark = (from) => markFrame(root, from);
  state.compute = () => {
    state.last = batchNumbers(state, chosen());
    return state.last;
  };
  wireControl(root, state, input, () => {
    state.label();
    drawBatches(root, state, state.compute());
    broadcastLive(state, state.last);
    mark("browser");
    root.querySelector(".lv-status").textContent =
      "The figure below follows in this browser; let go and lnviz recomputes the section.";
  });
  state.update = (data) => {
    if (state.data === null || data.sample !== state.data.sample) {
      state.sample = fromBase64(data.sample);
    }
    if (state.data === null || data.mates !== state.data.mates) {
      state.mates = fromBase64(data.mates, Float32Array);
    }
    state.data = data;
    registerLive(state);
    root.querySelector("[data-help=batch]").title = data.help;
    input.title = data.help;
    const server = data.server;
    input.max = String(data.maxBatch);
    if (!holding(state, data)) setControl(state, input, server.batch);
    state.label();
    state.compute();
    if (chosen() === server.batch) {
      const batchNorm = server.batchNorm === null ? null : fromBase64(server.batchNorm);
      drawBatches(root, state, {batch: server.batch, batchNorm, bnSpread: server.bnSpread,
                                layerNorm: fromBase64(server.layerNorm),
                                lnSpread: server.lnSpread}, "server");
      mark("server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag the batch size and the figure below follows in this "
        + "browser.";
      window.dispatchEvent(new CustomEvent("lnviz-settled", {detail: {key: data.key}}));
    } else {
      drawBatches(root, state, state.last);
      broadcastLive(state, state.last);  // a run moved on from: the figure keeps the control
      mark("browser");
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-batches", setupBatches);
}
