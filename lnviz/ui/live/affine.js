// Scale and shift, live: γ and β move a histogram of y = γ·x̂ + β while they are dragged. x̂ is
// liveNormalize's LayerNorm of the page's samples (one row); on release the value goes to Python
// as a trigger and the panel settles on lnviz's histogram and statistics.

function histogram(values, lo, hi, bins) { // numpy.histogram's: the last bin includes hi
  const counts = new Array(bins).fill(0);
  for (const v of values) {
    if (!(v >= lo && v <= hi)) continue;
    counts[v === hi ? bins - 1 : Math.floor((v - lo) / (hi - lo) * bins)] += 1;
  }
  return counts;
}

function affineNumbers(x, gamma, beta, data) {
  const r = liveNormalize({x, shape: [1, x.length], layout: "NC", norm: "LayerNorm", dims: 1,
                          eps: data.eps, gamma, beta});
  const stats = liveGroupStats(r.y, r, "LayerNorm");
  return {gamma, beta, y: r.y, counts: histogram(r.y, data.span[0], data.span[1], data.bins),
          mean: stats.mean[0], std: stats.spread[0]};
}

function drawAffine(root, shown, data) {
  const [lo, hi] = data.span;
  const w = 600 / data.bins;
  const top = Math.max(...shown.counts, 1);
  const at = (v) => ((v - lo) / (hi - lo) * 600).toFixed(1);
  const ticks = [];
  for (let t = Math.ceil(lo / 4) * 4; t <= hi; t += 4) {
    ticks.push(`<text x="${at(t)}" y="128" text-anchor="middle">${String(t).replace("-", "−")}</text>`);
  }
  root.querySelector("svg").innerHTML = shown.counts.map((n, k) =>
    `<rect x="${(k * w).toFixed(1)}" y="${(115 - 110 * n / top).toFixed(1)}" `
    + `width="${(w - 0.5).toFixed(1)}" height="${(110 * n / top).toFixed(1)}"><title>${n}</title></rect>`)
    .join("")
    + `<line class="lv-mean" x1="${at(shown.mean)}" x2="${at(shown.mean)}" y1="0" y2="115"/>`
    + [shown.mean - shown.std, shown.mean + shown.std].map((v) =>
      `<line class="lv-sd" x1="${at(v)}" x2="${at(v)}" y1="0" y2="115"/>`).join("")
    + ticks.join("");
  const f = (v) => v.toFixed(3).replace("-", "−");
  root.querySelector("tbody").innerHTML =
    `<tr><th scope="row">measured</th><td>${f(shown.mean)}</td><td>${f(shown.std)}</td></tr>`
    + `<tr><th scope="row">β and |γ|</th><td>${f(shown.beta)}</td>`
    + `<td>${f(Math.abs(shown.gamma))}</td></tr>`;
  root.querySelector("[data-title=histogram]").textContent =
    `γ = ${String(shown.gamma).replace("-", "−")}, β = ${String(shown.beta).replace("-", "−")}: `
    + `${data.n} values of γ·x̂ + β`;
}

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
  const mark = (from) => markFrame(root, from);
  for (const input of inputs) {
    wireControl(root, state, input, () => {
      state.label();
      drawAffine(root, state.compute(), state.data);
      mark("browser");
    });
  }
  state.update = (data) => {
    if (state.data === null || data.x !== state.data.x) state.x = fromBase64(data.x);
    state.data = data;
    const server = data.server;
    if (!holding(state, data)) {
      setControl(state, root.querySelector("input[data-control=gamma]"), server.gamma);
      setControl(state, root.querySelector("input[data-control=beta]"), server.beta);
    }
    state.label();
    state.compute();
    if (value("gamma") === server.gamma && value("beta") === server.beta) {
      drawAffine(root, {gamma: server.gamma, beta: server.beta, counts: server.counts,
                        mean: server.mean, std: server.std}, data);
      mark("server");
      root.querySelector(".lv-status").textContent =
        "Showing lnviz's numbers; drag γ or β and the histogram follows in this browser.";
    } else {
      drawAffine(root, state.last, data);
      mark("browser");
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-affine", setupAffine);
}
