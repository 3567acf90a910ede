// The Explorer's ε, γ and β: range inputs that are the page's only controls for them. While one
// moves ("input" events) the norm is recomputed here with norms.js and the numbers go out to the
// page's figures (figure.js) as an "lnviz-live" event; when it is let go ("change") the value
// goes to Python as a trigger, lnviz recomputes the page, and the figures settle on lnviz's
// numbers. A tensor over the live limit is not sent: its figures follow on release only.

function fmt(v) {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "−∞";
  const text = Math.abs(v) < 5e-5 && v !== 0 ? v.toExponential(2) : v.toPrecision(4);
  return text.replace(/(\.\d*?)0+(e|$)/, "$1$2").replace(/\.(e|$)/, "$1").replace("-", "−");
}

function epsLabel(eps) {
  return eps === 0 ? "0" : `1e${Math.round(Math.log10(eps))}`;
}

// The page's figures follow the controls (common.js's broadcastLive).
function broadcast(state) {
  const {y, xHat, eps, gamma, beta, meanOut, spreadOut} = state.last;
  broadcastLive(state, {y, xHat, eps, gamma, beta, meanOut, spreadOut});
  markFrame(state.root, "browser");
}

// Scrolled past, the controls stay at hand: pinned under the app's header, over the column
// they sit in, so that they can be dragged while the figures further down are watched.
function pinWhenScrolledPast(root) {
  const bar = root.querySelector(".lv-controls");
  const place = root.querySelector(".lv-place");
  const header = () => (document.querySelector('[data-testid="stHeader"]')
    || {getBoundingClientRect: () => ({bottom: 0})}).getBoundingClientRect().bottom;
  const fit = () => {
    if (!bar.classList.contains("lv-pinned")) return;
    const box = place.getBoundingClientRect();
    bar.style.left = `${box.left}px`;
    bar.style.width = `${box.width}px`;
    bar.style.top = `${header()}px`;
  };
  const check = () => {
    const box = place.getBoundingClientRect();
    const pin = box.bottom < header() && root.isConnected;
    if (pin !== bar.classList.contains("lv-pinned")) {
      place.style.height = pin ? `${bar.offsetHeight}px` : "";
      bar.classList.toggle("lv-pinned", pin);
      if (!pin) bar.style.left = bar.style.width = bar.style.top = "";
    }
    fit();
  };
  document.addEventListener("scroll", check, {capture: true, passive: true});
  window.addEventListener("resize", check);
}

function setup(root) {
  const state = {root, data: null, problem: null};
  pinWhenScrolledPast(root);
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
    controls.eps.setAttribute("aria-valuetext", `ε = ${epsLabel(v.eps)}`);
    root.querySelector("[data-show=eps]").textContent = epsLabel(v.eps);
    if (!state.data.perFeature) {
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

  state.live = () => {
    state.label();
    if (!state.problem) return;  // over the live limit: the figures follow on release
    state.compute();
    broadcast(state);
    root.querySelector(".lv-status").textContent =
      "The figures below follow in this browser; let go and lnviz recomputes the page.";
  };

  // New data from the server: its settings move the controls (the server may have corrected a
  // value, or a link, a reset or another page set them).
  state.update = (data) => {
    const fresh = state.data === null || data.key !== state.data.key;
    state.data = data;
    registerLive(state);
    if (fresh) {
      state.problem = data.x == null ? null : {
        x: fromBase64(data.x), shape: data.shape, layout: data.layout, norm: data.norm,
        training: data.training, warmup: data.warmup, momentum: data.momentum, mask: data.mask,
        useMask: data.useMask, groupIds: fromBase64(data.groupIds, Int32Array),
        paramIds: fromBase64(data.paramIds, Int32Array),
        positions: fromBase64(data.positions, Int32Array), groupCount: data.groupCount};
    }
    for (const [name, text] of Object.entries(data.help)) {
      root.querySelector(`[data-help=${name}]`).title = text;
      controls[name].title = text;
    }
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
    root.querySelector(".lv-note").textContent = data.note;
    state.label();
    if (state.problem) state.compute();
    const v = state.values();
    const settled = v.eps === data.server.epsValue && (data.perFeature
      || (v.gamma === data.server.gamma && (data.norm === "RMSNorm" || v.beta === data.server.beta)));
    if (settled) {
      markFrame(root, "server");
      root.querySelector(".lv-status").textContent = state.problem
        ? "Showing lnviz's numbers; drag a control and the figures below follow in this browser."
        : "";
      window.dispatchEvent(new CustomEvent("lnviz-settled", {detail: {key: data.key}}));
    } else if (state.problem) {
      broadcast(state);  // a run the learner has moved on from: the figures keep the controls
    }
  };
  return state;
}

export default function (component) {
  mountPanel(component, ".lv-root", setup);
}
