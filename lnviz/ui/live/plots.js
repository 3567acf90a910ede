// What the page's live figures (figure.js) recompute while a control moves, as lnviz computes it
// for the settled figure: the colorbars' labels, the colour range, the histogram's bins, and which
// traces of each figure kind take the browser's numbers. Plain functions, no DOM: Node's tests
// (tests/js/plots.test.mjs) check them against lnviz on the cases tools/live_fixtures.py writes.

const BINS = 60; // lnviz.lessons.explorer.histogram's bins

// Python's f"{v:.{digits}g}" (the colorbars' end labels: lnviz.charts.base.colorbar_below).
function formatG(v, digits) {
  if (v === 0) return "0";
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  const exponent = Math.floor(Math.log10(Math.abs(Number(v.toPrecision(digits)))));
  if (exponent < -4 || exponent >= digits) {
    const [mantissa, power] = v.toExponential(digits - 1).split("e");
    const trimmed = mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa;
    const p = Number(power);
    return `${trimmed}e${p < 0 ? "-" : "+"}${String(Math.abs(p)).padStart(2, "0")}`;
  }
  const fixed = v.toFixed(Math.max(0, digits - 1 - exponent));
  return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
}

// Python's f"{v:.0e}" (the chosen ε's name on the ε page: 1e-05, 1e+00).
function formatE0(v) {
  const [mantissa, power] = v.toExponential(0).split("e");
  const p = Number(power);
  return `${mantissa}e${p < 0 ? "-" : "+"}${String(Math.abs(p)).padStart(2, "0")}`;
}

// lnviz.charts.base.symmetric_range: ±(largest finite |value|), or ±1.
function symmetricRange(values) {
  let top = 0;
  for (const v of values) if (Number.isFinite(v)) top = Math.max(top, Math.abs(v));
  return [-(top || 1), top || 1];
}

// lnviz.lessons.explorer.histogram: numpy's histogram of the finite values over BINS equal bins,
// binned after dividing by the largest magnitude; returns (centres, counts).
function histogram(values) {
  const finite = [];
  for (const v of values) if (Number.isFinite(v)) finite.push(v);
  if (!finite.length) return [[], []];
  let scale = 0;
  for (const v of finite) scale = Math.max(scale, Math.abs(v));
  scale = scale || 1;
  const a = finite.map((v) => v / scale);
  let first = Math.min(...a);
  let last = Math.max(...a);
  if (first === last) { first -= 0.5; last += 0.5; }
  const step = (last - first) / BINS;
  const edges = Array.from({length: BINS + 1}, (_, k) => k * step + first);
  edges[BINS] = last;
  const counts = new Array(BINS).fill(0);
  const norm = BINS / (last - first);
  for (const v of a) {
    let k = Math.trunc((v - first) * norm);
    if (k === BINS) k -= 1;
    if (v < edges[k]) k -= 1;
    else if (k !== BINS - 1 && v >= edges[k + 1]) k += 1;
    counts[k] += 1;
  }
  const centres = edges.slice(0, BINS).map((e, k) => (e / 2 + edges[k + 1] / 2) * scale);
  return [centres, counts];
}

// Scale and shift (affine.js): numpy.histogram of `values` on `bins` equal bins over [lo, hi]
// (edges as numpy.linspace makes them; a value on an edge goes right, hi into the last bin).
function fixedHistogram(values, lo, hi, bins) {
  const step = (hi - lo) / bins;
  const edges = Array.from({length: bins + 1}, (_, k) => k * step + lo);
  edges[bins] = hi;
  const counts = new Array(bins).fill(0);
  for (const v of values) {
    if (!(v >= lo && v <= hi)) continue;
    let k = Math.min(Math.floor((v - lo) / step), bins - 1);
    while (k > 0 && v < edges[k]) k -= 1;
    while (k < bins - 1 && v >= edges[k + 1]) k += 1;
    counts[k] += 1;
  }
  return counts;
}

// y = γ·x̂ + β for the samples `x` (LayerNorm of one row, liveNormalize of norms.js), its
// histogram on the page's fixed bins (data.span, data.bins), mean and std.
function affineNumbers(x, gamma, beta, data) {
  const r = liveNormalize({x, shape: [1, x.length], layout: "NC", norm: "LayerNorm", dims: 1,
                          eps: data.eps, gamma, beta});
  const stats = liveGroupStats(r.y, r, "LayerNorm");
  return {gamma, beta, y: r.y, counts: fixedHistogram(r.y, data.span[0], data.span[1], data.bins),
          mean: stats.mean[0], std: stats.spread[0]};
}

// What each kind of figure takes from the live numbers: {trace indices, restyle update}.
const UPDATES = {
  heatmaps(live, data) {  // lnviz.charts.explorer.norm_heatmaps: trace 1 is the output
    const z = [];
    for (let r = 0; r < data.rows; r++) z.push(Array.from(live.y.subarray(r * data.cols, (r + 1) * data.cols)));
    const [low, high] = symmetricRange(live.y);
    return [[1], {z: [z], zmin: [low], zmax: [high], "colorbar.tickvals": [[low, 0, high]],
                  "colorbar.ticktext": [[formatG(low, 2), "0", formatG(high, 2)]]}];
  },
  stats(live, data) {  // group_stats_figure: traces 1 and 3 are μ and the spread after
    const pick = (values) => data.shown.map((g) => values[g]);
    return [[1, 3], {y: [pick(live.meanOut), pick(live.spreadOut)]}];
  },
  distributions(live) {  // distributions_figure: trace 1 is the histogram after
    const [centres, counts] = histogram(live.y);
    return [[1], {x: [centres], y: [counts]}];
  },
  // lnviz.charts.scale_shift.histogram_figure: trace 0 the bars (on fixed bins), 1-3 the lines
  // at the mean and mean ± std, up to 1.05 × the tallest bar; the title names γ, β and both.
  affine(live, data) {
    const top = live.counts.length ? Math.max(...live.counts) : 1;
    const line = (x) => [x, x];
    const height = [0, top * 1.05];
    const {mean, std} = live;
    const fixed3 = (v) => (v.toFixed(3) === "-0.000" ? "0.000" : v.toFixed(3));  // _fixed3
    const title = `γ = ${formatG(live.gamma, 6)}, β = ${formatG(live.beta, 6)} → mean `
      + `${fixed3(mean)}, std ${fixed3(std)}`;
    return [[0, 1, 2, 3],
      {x: [data.figure.data[0].x, line(mean), line(mean - std), line(mean + std)],
       y: [live.counts, height, height, height]},
      {"title.text": title}];
  },
  // lnviz.charts.epsilon.sweep_figure: the two "chosen ε" lines (one per panel) move to ε,
  // hidden at ε = 0, which a log axis cannot show.
  sweep(live, data) {
    const traces = data.figure.data.flatMap((t, i) => (
      String(t.name || "").startsWith("chosen ε") ? [i] : []));
    const name = live.eps ? `chosen ε = ${formatE0(live.eps)}` : "chosen ε = 0";
    const at = live.eps || 1;  // ε = 0: hidden, anywhere on the axis
    return [traces, {x: traces.map(() => [at, at]), name: traces.map(() => name),
                     legendgroup: traces.map(() => name), visible: traces.map(() => live.eps > 0),
                     hovertemplate: traces.map(() => `${name}<extra></extra>`)}];
  },
  // lnviz.charts.bn_vs_ln.redraws_figure: one line per re-drawn batch, BatchNorm's first (hidden
  // where a batch of one is refused, and the annotation named "refusal" shown with its axes
  // hidden), then LayerNorm's; `live` holds both as (re-draws, C) arrays, row-major.
  redraws(live, data) {
    const figure = data.figure;
    const bn = figure.data.flatMap((t, i) => (t.legendgroup === "BatchNorm" ? [i] : []));
    const ln = figure.data.flatMap((t, i) => (t.legendgroup === "LayerNorm" ? [i] : []));
    const features = live.layerNorm.length / ln.length;
    const row = (values, r) => Array.from(values.subarray(r * features, (r + 1) * features));
    const refused = live.batchNorm === null;
    const y = [...bn.map((_, r) => (refused ? row(new Float64Array(live.layerNorm.length)
      .fill(NaN), r) : row(live.batchNorm, r))), ...ln.map((_, r) => row(live.layerNorm, r))];
    const notice = figure.layout.annotations.findIndex((a) => a.name === "refusal");
    return [[...bn, ...ln], {y, visible: [...bn.map(() => !refused), ...ln.map(() => true)]},
      {[`annotations[${notice}].visible`]: refused, "xaxis.visible": !refused,
       "yaxis.visible": !refused}];
  },
};

// The Explorer's step-by-step table (table.js): what a cell shows, and which columns move.
const TABLE_DIGITS = 6;

function cellText(value) {
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string") return value;
  if (value === null || Number.isNaN(value)) return "NaN";  // as the app's tables write it
  if (Object.is(value, -0)) return "−0";  // Python's .6g keeps the sign of zero
  return formatG(value, TABLE_DIGITS).replace(/-/g, "−");
}

// The columns of `table` (the server's {columns, cells, elements, sqrtOf}) for the panel's
// numbers `live` ({eps, gamma, beta, xHat, y}): a new {name: values} for every column that moves.
function liveStepColumns(table, live) {
  const moved = {};
  const at = (values) => table.elements.map((e) => values[e]);
  if (live.xHat) moved["x̂"] = at(live.xHat);
  if (live.y) moved.y = at(live.y);
  if (table.sqrtOf) {
    const variance = table.cells[table.sqrtOf.column];
    moved[table.sqrtOf.name] = variance.map((v) => Math.sqrt(v + live.eps));
  }
  if (typeof live.gamma === "number" && "γ" in table.cells) {
    moved["γ"] = table.elements.map(() => live.gamma);
  }
  if (typeof live.beta === "number" && "β" in table.cells) {
    moved["β"] = table.elements.map(() => live.beta);
  }
  return moved;
}

// The table's cells as the server sent them: numbers in base64 (common.js's fromBase64), text.
function stepCells(cells) {
  const out = {};
  for (const [name, column] of Object.entries(cells)) {
    out[name] = typeof column === "string" ? Array.from(fromBase64(column)) : column;
  }
  return out;
}
