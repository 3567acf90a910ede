// The live panel: range inputs for ε, γ and β and the small views they drive. While a control
// moves ("input" events) the views are recomputed here with norms.js; when it is let go
// ("change") the value goes to Python as a trigger, lnviz recomputes, and the panel settles on
// the numbers the server sends back (which also move the page's own sliders and its URL).

const DIVERGING = [[0, [33, 102, 172]], [0.25, [103, 169, 207]], [0.5, [247, 247, 247]],
                   [0.75, [253, 184, 99]], [1, [179, 88, 6]]]; // lnviz.charts.base.DIVERGING
const BINS = 30;
const STEP_ROWS = 4;

function colour(value, range) {
  if (!Number.isFinite(value)) return "rgb(150,150,150)";
  const t = Math.min(1, Math.max(0, 0.5 + value / (2 * range)));
  let k = 1;
  while (k < DIVERGING.length - 1 && DIVERGING[k][0] < t) k++;
  const [t0, c0] = DIVERGING[k - 1];
  const [t1, c1] = DIVERGING[k];
  const f = (t - t0) / (t1 - t0);
  return `rgb(${c0.map((c, i) => Math.round(c + f * (c1[i] - c))).join(",")})`;
}

function largest(values) {
  let top = 0;
  for (const v of values) if (Number.isFinite(v)) top = Math.max(top, Math.abs(v));
  return top || 1;
}

function fmt(v) {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "−∞";
  const text = Math.abs(v) < 5e-5 && v !== 0 ? v.toExponential(2) : v.toPrecision(4);
  return text.replace(/(\.\d*?)0+(e|$)/, "$1$2").replace(/\.(e|$)/, "$1").replace("-", "−");
}

/** An element's index in the tensor, as lnviz's step-by-step table names it: "(0, 2)". */
function position(i, shape) {
  const index = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    index.unshift(i % shape[d]);
    i = Math.floor(i / shape[d]);
  }
  return `(${index.join(", ")})`;
}

function epsLabel(eps) {
  return eps === 0 ? "0" : `1e${Math.round(Math.log10(eps))}`;
}

function drawHeatmap(canvas, values, rows, cols, range) {
  const cell = Math.max(3, Math.min(24, Math.floor(320 / Math.max(cols, rows / 2))));
  if (canvas.width !== cols * cell) canvas.width = cols * cell;
  if (canvas.height !== rows * cell) canvas.height = rows * cell;
  const ctx = canvas.getContext("2d");
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      ctx.fillStyle = colour(values[r * cols + c], range);
      ctx.fillRect(c * cell, r * cell, cell, cell);
    }
  }
}

function drawHistogram(svg, values, range) {
  const counts = new Array(BINS).fill(0);
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    const k = Math.floor((v + range) / (2 * range) * BINS);
    counts[Math.min(BINS - 1, Math.max(0, k))] += 1; // beyond ±range: the edge bins
  }
  const top = Math.max(...counts, 1);
  const w = 300 / BINS;
  svg.innerHTML = counts.map((n, k) =>
    `<rect x="${(k * w).toFixed(1)}" y="${(100 - 96 * n / top).toFixed(1)}" `
    + `width="${(w - 1).toFixed(1)}" height="${(96 * n / top).toFixed(1)}"><title>`
    + `${n}</title></rect>`).join("")
    + `<line x1="150" x2="150" y1="0" y2="100" class="lv-zero"/>`;
}

function setup(root) {
  const state = {root, data: null, problem: null, before: null, outRange: 1};
  const controls = {};
  for (const input of root.querySelectorAll("input[type=range]")) {
    const name = input.dataset.control;
    controls[name] = input;
    wireControl(root, state, input, () => state.live());
  }
  state.controls = controls;

  state.values = () => {
    const d = state.data;
    return {
      eps: d.epsilons[controlValue(state, controls.eps)],
      gamma: d.perFeature ? d.gamma : controlValue(state, controls.gamma),
      beta: d.perFeature || d.norm === "RMSNorm" ? d.beta : controlValue(state, controls.beta),
    };
  };

  state.label = () => {
    const v = state.values();
    const d = state.data;
    controls.eps.setAttribute("aria-valuetext", `ε = ${epsLabel(v.eps)}`);
    root.querySelector("[data-show=eps]").textContent = epsLabel(v.eps);
    if (!d.perFeature) {
      for (const name of ["gamma", "beta"]) {
        const text = stepLabel(controlValue(state, controls[name]));
        controls[name].setAttribute("aria-valuetext", `${name === "gamma" ? "γ" : "β"} = ${text}`);
        root.querySelector(`[data-show=${name}]`).textContent = text;
      }
    }
  };

  // The numbers the browser computes for the controls' current values (kept for tests).
  state.compute = () => {
    const v = state.values();
    const result = liveNormalize({...state.problem, ...v});
    const after = liveGroupStats(result.y, result, state.data.norm);
    state.last = {...v, y: result.y, xHat: result.xHat, mean: result.mean, var: result.var,
                  rstd: result.rstd, group: result.group, meanOut: after.mean,
                  spreadOut: after.spread, result};
    return state.last;
  };

  // Draw either the browser's numbers or the server's (lnviz's), which have the same shape.
  state.draw = (shown, from) => {
    const d = state.data;
    const started = performance.now();
    drawHeatmap(root.querySelector("canvas[data-panel=out]"), shown.y, d.rows, d.cols,
                state.outRange);
    drawHistogram(root.querySelector("svg.lv-hist"), shown.y, state.outRange);
    const body = root.querySelector("table.lv-stats tbody");
    const before = state.before;
    body.innerHTML = Array.from({length: Math.min(d.statsRows, before.mean.length)}, (_, g) =>
      `<tr><th scope="row">${g}</th><td>${fmt(before.mean[g])}</td>`
      + `<td>${fmt(before.spread[g])}</td><td>${fmt(shown.meanOut[g])}</td>`
      + `<td>${fmt(shown.spreadOut[g])}</td></tr>`).join("");
    const steps = root.querySelector("table.lv-steps tbody");
    const r = state.last.result;
    const rows = [];
    for (let i = 0; i < r.group.length && rows.length < STEP_ROWS; i++) {
      if (r.group[i] !== d.group) continue;
      const g = r.group[i];
      const cells = [position(i, d.shape), fmt(state.problem.x[i])];
      if (d.norm !== "RMSNorm") cells.push(fmt(shown.mean[g]));
      cells.push(fmt(shown.var[g]), fmt(Math.sqrt(shown.var[g] + shown.eps)), fmt(shown.xHat[i]),
                 fmt(typeof shown.gamma === "number" ? shown.gamma : shown.gamma[r.param[i]]));
      if (d.norm !== "RMSNorm") {
        cells.push(fmt(typeof shown.beta === "number" ? shown.beta : shown.beta[r.param[i]]));
      }
      cells.push(fmt(shown.y[i]));
      rows.push(`<tr>${cells.map((c, k) => k ? `<td>${c}</td>` : `<th scope="row">${c}</th>`)
        .join("")}</tr>`);
    }
    steps.innerHTML = rows.join("");
    markFrame(root, from);
    state.drawMs = performance.now() - started;
  };

  state.live = () => {
    state.label();
    state.draw(state.compute(), "browser");
    root.querySelector(".lv-status").textContent =
      "Computed in this browser while the control moves; lnviz recomputes when it is let go.";
  };

  // New data from the server: its settings move the controls (the server may have corrected a
  // value), and the panel shows lnviz's numbers for them.
  state.update = (data) => {
    const fresh = state.data === null || data.key !== state.data.key;
    state.data = data;
    if (fresh) {
      state.problem = {x: fromBase64(data.x), shape: data.shape, layout: data.layout,
                       norm: data.norm, training: data.training, warmup: data.warmup,
                       momentum: data.momentum, mask: data.mask, useMask: data.useMask,
                       groupIds: fromBase64(data.groupIds, Int32Array),
                       paramIds: fromBase64(data.paramIds, Int32Array),
                       positions: fromBase64(data.positions, Int32Array),
                       groupCount: data.groupCount};
      const result = liveNormalize({...state.problem, eps: 1, gamma: 1, beta: 0});
      state.before = liveGroupStats(state.problem.x, result, data.norm);
      drawHeatmap(root.querySelector("canvas[data-panel=in]"), state.problem.x, data.rows,
                  data.cols, largest(state.problem.x));
    }
    root.querySelector("[data-title=out]").textContent = `output y (${data.norm})`;
    root.querySelector("[data-title=in-range]").textContent = `±${fmt(largest(state.problem.x))}`;
    const heads = ["position", "x", ...(data.norm === "RMSNorm"
      ? ["mean(x²)", "√(mean(x²)+ε)"]
      : data.norm === "BatchNorm" && !data.training
        ? ["running μ", "running σ²", "√(running σ²+ε)"] : ["μ", "σ²", "√(σ²+ε)"]),
      "x̂", "γ", ...(data.norm === "RMSNorm" ? [] : ["β"]), "y"];
    root.querySelector("table.lv-steps thead").innerHTML =
      `<tr>${heads.map((h) => `<th scope="col">${h}</th>`).join("")}</tr>`;
    root.querySelector("[data-title=steps]").textContent =
      `Step by step: group ${data.group}, its first ${STEP_ROWS} elements at most`;
    root.querySelector("[data-title=spread]").textContent = data.spreadName;
    root.querySelectorAll("[data-title=spread-col]").forEach((e) => {
      e.textContent = data.norm === "RMSNorm" ? "RMS" : "σ";
    });
    controls.eps.max = String(data.epsilons.length - 1);
    if (!holding(state, data)) {
      setControl(state, controls.eps, data.server.eps);
      if (!data.perFeature) {
        setControl(state, controls.gamma, data.server.gamma);
        setControl(state, controls.beta, data.server.beta);
      }
    }
    root.querySelector("[data-control-box=gamma]").hidden = data.perFeature;
    root.querySelector("[data-control-box=beta]").hidden =
      data.perFeature || data.norm === "RMSNorm";
    root.querySelector(".lv-note").textContent = data.perFeature
      ? "γ and β are per feature: edit them in the table above; ε moves live here."
      : data.norm === "RMSNorm" ? "β: none under RMSNorm, which shifts nothing." : "";
    state.label();
    state.compute();
    const server = data.server;
    const y = fromBase64(server.y);
    state.outRange = largest(y);
    root.querySelector("[data-title=out-range]").textContent = `±${fmt(state.outRange)}`;
    const v = state.values();
    const settled = v.eps === server.epsValue && (data.perFeature
      || (v.gamma === server.gamma && (data.norm === "RMSNorm" || v.beta === server.beta)));
    if (settled) {
      state.draw({...v, y, xHat: fromBase64(server.xHat), mean: server.mean ? fromBase64(server.mean) : null,
                  var: fromBase64(server.var), meanOut: fromBase64(server.meanOut),
                  spreadOut: fromBase64(server.spreadOut)}, "server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag a control and the views follow in this browser.";
    } else {
      state.draw(state.last, "browser");
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-root", setup);
}
