// The Explorer's step-by-step table, drawn in the browser so that it follows the ε, γ and β
// controls at every step of a drag. The server sends the table lnviz computed for one group (the
// settled state) and the flat index of each row's element; while a control moves, the columns
// that depend on it take the numbers the panel computed (view.js's broadcast): √(σ²+ε) from the
// row's σ² and the new ε, x̂ and y as the panel normalized them, γ and β as they are now.
// Numbers are written as Python's f"{v:.6g}" writes them (NaN as "NaN"), settled or live
// (plots.js: liveStepColumns, cellText). The browser computes in float64 and lnviz in the page's
// precision: after release a float32 page can differ in a cell's sixth digit.

function setupTable(root) {
  const state = {root, data: null, cells: null};
  const table = root.querySelector("table");

  state.draw = (cells) => {
    const {columns} = state.data;
    const rows = state.data.elements.length;
    const body = table.tBodies[0];
    const head = table.tHead.rows[0];
    if (body.rows.length !== rows || head.cells.length !== columns.length) {
      head.innerHTML = columns.map(() => "<th scope=col></th>").join("");
      body.innerHTML = Array.from({length: rows},
        () => `<tr>${columns.map(() => "<td></td>").join("")}</tr>`).join("");
    }
    // the names too: another norm or mode names the same number of columns otherwise
    columns.forEach((name, k) => { head.cells[k].textContent = name; });
    columns.forEach((name, k) => {
      const column = cells[name];
      for (let i = 0; i < rows; i++) body.rows[i].cells[k].textContent = cellText(column[i]);
    });
  };

  state.apply = (live) => {
    state.draw({...state.cells, ...liveStepColumns({...state.data, cells: state.cells}, live)});
    markFrame(root, "browser");
  };
  state.settle = () => {
    state.draw(state.cells);
    markFrame(root, "server");
  };
  state.listen = (event) => {
    if (state.data && event.detail.key === state.data.panel) state.apply(event.detail);
  };
  state.settled = (event) => {
    if (state.data && event.detail.key === state.data.panel
        && root.dataset.shown === "browser") state.settle();
  };
  window.addEventListener("lnviz-live", state.listen);
  window.addEventListener("lnviz-settled", state.settled);

  state.update = (data) => {
    state.data = data;
    state.cells = stepCells(data.cells);
    state.settle();
    // a control still held (or not yet answered) keeps the table on the browser's numbers
    const panel = (window.lnvizLive || {})[data.panel];
    if (panel && panel.pending() && panel.last) state.apply(panel.last);
  };
  return state;
}

export default function (component) {
  const {data, parentElement} = component;
  const root = parentElement.querySelector(".lv-steps");
  if (!root || !data) return;
  const state = root.__lvt || (root.__lvt = setupTable(root));
  state.update(data);
}
