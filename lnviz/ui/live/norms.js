// lnviz's five normalizations, in the browser: the same arithmetic as lnviz/norms.py, so that the
// Explorer's small views can follow a slider while it is dragged. The server stays the source of
// truth (it recomputes with lnviz on release); tests/test_browser_live.py checks that these numbers
// equal lnviz's. Plain functions over flat arrays in the tensor's row-major order; no DOM here.
//
// A problem is {x, shape, layout, norm, training, warmup, momentum, mask, eps, gamma, beta} and,
// from lnviz, who shares μ and σ {groupIds, paramIds, positions, groupCount} (liveGroups): x a
// Float64Array of the tensor's values, layout "NC" | "NLC" | "NCHW", mask (or null) 0/1 per
// position of the shape without the channel dim (1 = a real token), gamma and beta one number or
// one per feature, as lnviz.batch.NormSpec holds them.

/** For every element, its group (whose μ and σ normalize it), the index of its γ and β, and
 * the index of its position in the mask. The Explorer's panel is sent them by lnviz
 * (lnviz.batch.grouping: p.groupIds, p.paramIds, p.positions, p.groupCount); the panels that
 * build a (rows, features) table in the browser, whose size moves with a slider, group it here:
 * LayerNorm and RMSNorm one group per row, BatchNorm one per feature. */
function liveGroups(p) {
  if (p.groupIds != null) {
    return {group: p.groupIds, param: p.paramIds, position: p.positions, count: p.groupCount};
  }
  const byRow = p.norm === "LayerNorm" || p.norm === "RMSNorm";
  if (p.shape.length !== 2 || p.layout !== "NC" || (!byRow && p.norm !== "BatchNorm")) {
    throw new Error(`${p.norm} on ${p.layout} needs its groups from lnviz`);
  }
  const [rows, cols] = p.shape;
  const group = new Int32Array(rows * cols);
  const param = new Int32Array(rows * cols);
  const position = new Int32Array(rows * cols);
  for (let i = 0; i < rows * cols; i++) {
    group[i] = byRow ? Math.floor(i / cols) : i % cols;
    param[i] = i % cols;
    position[i] = Math.floor(i / cols);
  }
  return {group, param, position, count: byRow ? rows : cols};
}

/** Σw·v/n per group, as lnviz's _mean: the sum over the group's values, divided by n. */
function groupMean(values, ids, weights, count, n) {
  const sums = new Float64Array(count);
  for (let i = 0; i < values.length; i++) {
    if (weights === null || weights[i]) sums[ids[i]] += values[i];
  }
  for (let g = 0; g < count; g++) sums[g] /= n[g];
  return sums;
}

/** μ and the biased σ² per group (lnviz.norms.mean_and_var): μ₁ = Σx/n, then the rounding
 * error e = Σ(x − μ₁)/n is taken out of both, so a constant group has x − μ = 0 exactly. */
function meanAndVar(x, ids, weights, count) {
  const n = new Float64Array(count);
  for (let i = 0; i < x.length; i++) if (weights === null || weights[i]) n[ids[i]] += 1;
  const first = groupMean(x, ids, weights, count, n);
  const centred = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) centred[i] = x[i] - first[ids[i]];
  const error = groupMean(centred, ids, weights, count, n);
  const mean = new Float64Array(count);
  for (let g = 0; g < count; g++) mean[g] = first[g] + error[g];
  const squares = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    centred[i] -= error[ids[i]];
    squares[i] = centred[i] * centred[i];
  }
  return {mean, var: groupMean(squares, ids, weights, count, n), centred, n};
}

function paramAt(value, k) {
  return typeof value === "number" ? value : value[k];
}

/** The chosen norm on p.x: {mean (null for RMSNorm), var, rstd, xHat, y, group, param, count}
 * with one mean/var/rstd per group, as lnviz.batch.normalize computes them. */
function liveNormalize(p) {
  const {group, param, position, count} = liveGroups(p);
  const x = p.x;
  const masked = p.norm === "BatchNorm" && p.mask != null && p.useMask !== false;
  const weights = masked ? Uint8Array.from(position, (k) => p.mask[k]) : null;
  let mean = null;
  let variance;
  let centred;
  if (p.norm === "RMSNorm") { // no μ: the mean square, ms = Σx²/H
    const squares = Float64Array.from(x, (v) => v * v);
    const n = new Float64Array(count).fill(x.length / count);
    variance = groupMean(squares, group, null, count, n);
    centred = x;
  } else if (p.norm === "BatchNorm" && !p.training) {
    // running statistics: μ = 0, σ² = 1, moved by `warmup` training passes over this batch
    // (unbiased σ², momentum m); ε plays no part in them
    const stats = meanAndVar(x, group, weights, count);
    mean = new Float64Array(count);
    variance = new Float64Array(count).fill(1);
    const m = p.momentum;
    for (let step = 0; step < p.warmup; step++) {
      for (let g = 0; g < count; g++) {
        const k = stats.n[g];
        mean[g] = mean[g] * (1 - m) + stats.mean[g] * m;
        variance[g] = variance[g] * (1 - m) + (stats.var[g] * k / (k - 1)) * m;
      }
    }
    centred = Float64Array.from(x, (v, i) => v - mean[group[i]]);
  } else {
    const stats = meanAndVar(x, group, weights, count);
    ({mean, centred} = stats);
    variance = stats.var;
  }
  const rstd = Float64Array.from(variance, (v) => 1 / Math.sqrt(v + p.eps));
  const xHat = new Float64Array(x.length);
  const y = new Float64Array(x.length);
  const shift = p.norm !== "RMSNorm";
  for (let i = 0; i < x.length; i++) {
    xHat[i] = centred[i] * rstd[group[i]];
    y[i] = paramAt(p.gamma, param[i]) * xHat[i] + (shift ? paramAt(p.beta, param[i]) : 0);
  }
  return {mean, var: variance, rstd, xHat, y, group, param, count, weights};
}

/** Mean and spread of `values` per group, as the Explorer's statistics show them
 * (lnviz.lessons.explorer.group_stats / group_rms): σ, or the RMS for RMSNorm. */
function liveGroupStats(values, r, norm) {
  const stats = meanAndVar(values, r.group, r.weights, r.count);
  if (norm !== "RMSNorm") return {mean: stats.mean, spread: stats.var.map(Math.sqrt)};
  const squares = Float64Array.from(values, (v) => v * v);
  return {mean: stats.mean,
          spread: groupMean(squares, r.group, null, r.count, stats.n).map(Math.sqrt)};
}

/** LayerNorm of one vector x (no γ, β) and ∂L/∂x for L = Σ g·y (the ε page's sweep):
 * ∂L/∂x = (g − mean(g) − x̂·mean(g·x̂))/√(σ² + ε). */
function liveLayerNormGrad(x, g, eps) {
  const r = liveNormalize({x, shape: [1, x.length], layout: "NC", norm: "LayerNorm", dims: 1,
                          eps, gamma: 1, beta: 0});
  const n = x.length;
  let gMean = 0;
  let gxMean = 0;
  for (let i = 0; i < n; i++) {
    gMean += g[i] / n;
    gxMean += g[i] * r.xHat[i] / n;
  }
  const grad = Float64Array.from(g, (gi, i) => (gi - gMean - r.xHat[i] * gxMean) * r.rstd[0]);
  return {xHat: r.xHat, grad};
}
