// BatchNorm vs LayerNorm, live: while the batch size is dragged, the fixed sample's output in
// every re-drawn batch is recomputed here (norms.js, training-mode BatchNorm with the batch's
// biased σ², and LayerNorm) from the batch-mates the server sent once: a batch of size B holds
// the fixed sample and the first B − 1 mates of each re-draw (lnviz.lessons.bn_vs_ln.batch_mates).
// On release the size goes to Python as a trigger and the panel settles on lnviz's numbers.

const PW = 300;
const PH = 150;

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

function scaleY(low, high) {
  const pad = Math.max((high - low) * 0.08, 1e-3);
  return (v) => PH - 4 - (v - low + pad) / (high - low + 2 * pad) * (PH - 12);
}

/** One panel of the re-draws view: features across, one line per re-drawn batch. */
function drawRedraws(svg, values, redraws, features, yOf, color, refusal) {
  if (values === null) {
    svg.innerHTML = `<text class="lv-refused" x="${PW / 2}" y="${PH / 2}" `
      + `text-anchor="middle">${refusal}</text>`;
    return;
  }
  const px = (c) => 36 + (features === 1 ? 0.5 : c / (features - 1)) * (PW - 46);
  const lines = [];
  for (let r = 0; r < redraws; r++) {
    const points = [];
    for (let c = 0; c < features; c++) {
      points.push(`${px(c).toFixed(1)},${yOf(values[r * features + c]).toFixed(1)}`);
    }
    lines.push(`<polyline stroke="${color}" points="${points.join(" ")}"/>`);
  }
  svg.innerHTML = `<line class="lv-axis" x1="32" x2="${PW}" y1="${PH}" y2="${PH}"/>`
    + `<line class="lv-axis" x1="32" x2="32" y1="0" y2="${PH}"/>`
    + lines.join("") + axisTicks(yOf, features, px);
}

/** Round y values from `low` to `high`, about four of them (steps of 1, 2 or 5 × 10^k). */
function niceTicks(low, high) {
  const raw = Math.max(high - low, 1e-6) / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(low / step) * step; v <= high + step * 1e-9; v += step) {
    ticks.push(Number(v.toPrecision(12)));
  }
  return ticks;
}

function axisTicks(yOf, features, px) {
  const ticks = niceTicks(...yOf.range).map((v) =>
    `<text x="28" y="${(yOf(v) + 3).toFixed(1)}" text-anchor="end">${fmtG(v)}</text>`);
  if (px) {
    const step = Math.max(1, Math.ceil(features / 8));
    for (let c = 0; c < features; c += step) {
      ticks.push(`<text x="${px(c).toFixed(1)}" y="${PH + 12}" text-anchor="middle">${c}</text>`);
    }
    ticks.push(`<text x="${PW}" y="${PH + 24}" text-anchor="end">feature</text>`);
  }
  return ticks.join("");
}

/** The batch-size sweep of one feature (the server's band, at its sizes) and a marker at the
 * chosen size: its re-draws' outputs for that feature, or "refused" at 1. */
function drawBand(svg, state, shown, yOf) {
  const {sizes, redraws: R, features: C, feature, maxBatch} = state.data;
  const px = (b) => 36 + Math.log(b) / Math.log(maxBatch) * (PW - 46);
  const upper = [];
  const lower = [];
  const ln = [];
  sizes.forEach((b, k) => {
    const row = state.sweepBn.subarray(k * R, (k + 1) * R);
    if (!Number.isNaN(row[0])) {
      upper.push(`${px(b).toFixed(1)},${yOf(Math.max(...row)).toFixed(1)}`);
      lower.unshift(`${px(b).toFixed(1)},${yOf(Math.min(...row)).toFixed(1)}`);
    }
    ln.push(`${px(b).toFixed(1)},${yOf(state.sweepLn[k * R]).toFixed(1)}`);
  });
  const at = px(shown.batch).toFixed(1);
  let marker = `<line class="lv-now" x1="${at}" x2="${at}" y1="0" y2="${PH}"/>`;
  if (shown.batchNorm === null) {
    marker += `<text x="${Number(at) + 4}" y="12">refused at 1</text>`;
  } else {
    for (let r = 0; r < R; r++) {
      marker += `<circle class="lv-marker" r="3.5" cx="${at}" `
        + `cy="${yOf(shown.batchNorm[r * C + feature]).toFixed(1)}"/>`;
    }
  }
  const ticks = [1, 2, 4, 8, 16, 32, 64].filter((b) => b <= maxBatch).map((b) =>
    `<text x="${px(b).toFixed(1)}" y="${PH + 12}" text-anchor="middle">${b}</text>`);
  svg.innerHTML = `<line class="lv-axis" x1="32" x2="${PW}" y1="${PH}" y2="${PH}"/>`
    + `<line class="lv-axis" x1="32" x2="32" y1="0" y2="${PH}"/>`
    + `<polygon class="lv-band" points="${upper.concat(lower).join(" ")}"/>`
    + `<polyline class="lv-ln" points="${ln.join(" ")}"/>`
    + marker + axisTicks(yOf) + ticks.join("")
    + `<text x="${PW}" y="${PH + 24}" text-anchor="end">batch size (log)</text>`;
}

function yScale(arrays) {
  let low = Infinity;
  let high = -Infinity;
  for (const values of arrays) {
    if (values === null) continue;
    for (const v of values) {
      if (Number.isFinite(v)) { low = Math.min(low, v); high = Math.max(high, v); }
    }
  }
  const yOf = scaleY(low, high);
  yOf.range = [low, high];
  return yOf;
}

function drawBatches(root, state, shown) {
  const d = state.data;
  const refused = shown.batchNorm === null;
  // BatchNorm beside LayerNorm on one y scale, so the two spreads compare at a glance
  const yOf = yScale([shown.batchNorm, shown.layerNorm]);
  drawRedraws(root.querySelector("svg[data-panel=batchnorm]"), shown.batchNorm, d.redraws,
              d.features, yOf, "#0072B2", "BatchNorm refused a batch of one");
  drawRedraws(root.querySelector("svg[data-panel=layernorm]"), shown.layerNorm, d.redraws,
              d.features, yOf, "#E69F00", "");
  drawBand(root.querySelector("svg[data-panel=band]"), state, shown,
           yScale([state.sweepBn, state.sweepLn, shown.batchNorm]));
  root.querySelector("[data-title=batchnorm]").textContent =
    `BatchNorm (training mode), ${d.redraws} batches of ${shown.batch}`;
  root.querySelector("[data-title=layernorm]").textContent =
    `LayerNorm, the same ${d.redraws} batches`;
  root.querySelector("[data-title=band]").textContent =
    `feature ${d.feature} against the batch size (marker: ${shown.batch})`;
  const notice = root.querySelector(".lv-refusal");
  notice.hidden = !refused;
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
    mark("browser");
  });
  state.update = (data) => {
    if (state.data === null || data.sample !== state.data.sample) {
      state.sample = fromBase64(data.sample);
    }
    if (state.data === null || data.mates !== state.data.mates) {
      state.mates = fromBase64(data.mates, Float32Array);
    }
    state.data = data;
    state.sweepBn = fromBase64(data.sweepBn);
    state.sweepLn = fromBase64(data.sweepLn);
    const server = data.server;
    input.max = String(data.maxBatch);
    if (!holding(state, data)) setControl(state, input, server.batch);
    state.label();
    state.compute();
    if (chosen() === server.batch) {
      const batchNorm = server.batchNorm === null ? null : fromBase64(server.batchNorm);
      drawBatches(root, state, {batch: server.batch, batchNorm, bnSpread: server.bnSpread,
                                layerNorm: fromBase64(server.layerNorm),
                                lnSpread: server.lnSpread});
      mark("server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag the batch size and the views follow in this browser.";
    } else {
      drawBatches(root, state, state.last);
      mark("browser");
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-batches", setupBatches);
}
