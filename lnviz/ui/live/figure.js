// A page figure drawn in the browser with Plotly.js, so that it can follow a live control at
// every step of a drag. The server sends the figure exactly as st.plotly_chart would draw it
// (lnviz.charts' dict, the settled state); while a control moves, the live panel broadcasts the
// numbers it computed ("lnviz-live" events on window) and the figure replaces the traces that
// depend on them, keeping everything else (axes, colour scales, labels, hover). Plotly.js is the
// copy the plotly package ships, served from the app's static/ folder (lnviz.ui.live.plotly_js).

const PLOTLY_URL = "./app/static/plotly.min.js";

function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__lnvizPlotly) {
    window.__lnvizPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = PLOTLY_URL;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window.__lnvizPlotly = null; reject(new Error(PLOTLY_URL)); };
      document.head.appendChild(script);
    });
  }
  return window.__lnvizPlotly;
}

// Streamlit's own look for st.plotly_chart: the template its "streamlit" theme (light, as
// .streamlit/config.toml sets) puts in place of the figure's, read from a chart it drew
// (Streamlit 1.67). The figure's own settings win over it, as they do in st.plotly_chart.
const STREAMLIT_TEMPLATE = {
  "layout": {
    "colorway": [
      "#0068c9",
      "#83c9ff",
      "#ff2b2b",
      "#ffabab",
      "#29b09d",
      "#7defa1",
      "#ff8700",
      "#ffd16a",
      "#6d3fc0",
      "#d5dae5"
    ],
    "font": {
      "color": "#808495",
      "family": "\"Source Sans\", sans-serif",
      "size": 12,
      "weight": 400
    },
    "title": {
      "color": "#2F2D2B",
      "subtitleColor": "#2F2D2B",
      "font": {
        "family": "\"Source Sans\", sans-serif",
        "size": 16,
        "color": "#2F2D2B"
      },
      "pad": {
        "l": 4
      },
      "xanchor": "left",
      "x": 0
    },
    "legend": {
      "title": {
        "font": {
          "size": 12,
          "color": "#808495"
        },
        "side": "top"
      },
      "valign": "top",
      "bordercolor": "transparent",
      "borderwidth": 0,
      "font": {
        "size": 12,
        "color": "#262730"
      }
    },
    "paper_bgcolor": "#FFFFFF",
    "plot_bgcolor": "#FFFFFF",
    "xaxis": {
      "zerolinecolor": "#e6eaf1",
      "gridcolor": "#e6eaf1",
      "showgrid": false,
      "tickfont": {
        "color": "#808495",
        "size": 12
      },
      "tickcolor": "#e6eaf1",
      "title": {
        "font": {
          "color": "#808495",
          "size": 14
        },
        "standoff": 20
      },
      "minor": {
        "gridcolor": "#e6eaf1"
      },
      "zeroline": false,
      "automargin": true
    },
    "yaxis": {
      "ticklabelposition": "outside",
      "zerolinecolor": "#e6eaf1",
      "title": {
        "font": {
          "color": "#808495",
          "size": 14
        },
        "standoff": 24
      },
      "tickcolor": "#e6eaf1",
      "tickfont": {
        "color": "#808495",
        "size": 12
      },
      "gridcolor": "#e6eaf1",
      "minor": {
        "gridcolor": "#e6eaf1"
      },
      "automargin": true
    },
    "margin": {
      "pad": 8,
      "r": 0,
      "l": 0
    },
    "hoverlabel": {
      "bgcolor": "#FFFFFF",
      "bordercolor": "rgba(47, 45, 43, 0.2)",
      "font": {
        "color": "#808495",
        "family": "\"Source Sans\", sans-serif",
        "size": 12
      }
    }
  }
};

function themed(layout) {
  return {...layout, template: STREAMLIT_TEMPLATE};
}

// On hover, two buttons (a PNG of the figure, axes back to where they were): every button is a
// tab stop, and plotly's full bar is ten per figure. Drag to zoom, double-click to reset.
const CONFIG = {displaylogo: false, responsive: true, displayModeBar: "hover",
                modeBarButtons: [["toImage", "resetScale2d"]]};

function setup(root) {
  const state = {root, data: null, plotly: null, live: null, drawn: null};
  const div = root.querySelector(".lv-plot");

  state.apply = (live) => {
    const [traces, update, layout] = UPDATES[state.data.kind](live, state.data);
    const started = performance.now();
    if (layout) state.plotly.update(div, update, layout, traces);
    else state.plotly.restyle(div, update, traces);
    state.live = live;
    root.dataset.shown = "browser";
    root.dataset.frame = String(Number(root.dataset.frame || 0) + 1);
    state.drawMs = performance.now() - started;
  };

  // One redraw per animation frame, with the latest numbers (a drag sends input events faster
  // than a figure redraws), and only while the figure is on screen: one scrolled out of view
  // takes the latest numbers when it comes back (a redraw costs 20-35 ms of Plotly.js).
  state.visible = true;
  state.flush = () => {
    state.frameRequested = false;
    if (state.waiting && state.visible) {
      const live = state.waiting;
      state.waiting = null;
      state.apply(live);
    }
  };
  state.listen = (event) => {
    const live = event.detail;
    if (!state.plotly || !state.data || live.key !== state.data.panel) return;
    state.waiting = live;
    if (state.visible && !state.frameRequested) {
      state.frameRequested = true;
      requestAnimationFrame(state.flush);
    }
  };
  window.addEventListener("lnviz-live", state.listen);
  new IntersectionObserver((entries) => {
    state.visible = entries[entries.length - 1].isIntersecting;
    if (state.visible && state.waiting) state.flush();
  }).observe(root);

  // The server's figure, as lnviz computed it: the settled state.
  state.settle = () => {
    const {data: traces, layout} = state.data.figure;
    state.plotly.react(div, traces, themed(layout), CONFIG);
    state.drawn = state.data.figure;
    state.waiting = null;
    root.dataset.shown = "server";
  };
  // The controls have taken the server's answer: a figure that kept the browser's numbers while
  // it waited for them shows lnviz's now.
  state.settled = (event) => {
    if (state.plotly && state.data && event.detail.key === state.data.panel
        && root.dataset.shown === "browser") state.settle();
  };
  window.addEventListener("lnviz-settled", state.settled);

  state.update = (data) => {
    state.data = data;
    loadPlotly().then((plotly) => {
      state.plotly = plotly;
      // a control still held (or whose value the server has not answered yet) keeps the figure
      // on the browser's numbers: this figure may come from a run started before it moved
      const panel = (window.lnvizLive || {})[data.panel];
      if (state.drawn !== data.figure) state.settle();
      if (panel && panel.pending() && panel.last) state.apply(panel.last);
      root.dataset.ready = "1";
    }).catch(() => {
      root.querySelector(".lv-fallback").hidden = false;
    });
  };
  return state;
}

export default function (component) {
  const {data, parentElement} = component;
  const root = parentElement.querySelector(".lv-figure");
  if (!root || !data) return;
  const state = root.__lvf || (root.__lvf = setup(root));
  state.update(data);
}
