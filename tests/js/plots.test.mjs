// The live figures' arithmetic (lnviz/ui/live/plots.js) against lnviz's, on the cases
// tools/live_fixtures.py writes (tests/test_live.py writes them afresh and runs this file): the
// histogram of the values after (numpy's bins, exactly), the colour range and the colorbars'
// end labels, so that a figure that followed a drag does not jump when the server's arrives.
import assert from "node:assert/strict";
import {readFileSync} from "node:fs";
import {dirname, join} from "node:path";
import {test} from "node:test";
import {fileURLToPath} from "node:url";
import vm from "node:vm";

const here = dirname(fileURLToPath(import.meta.url));
const live = join(here, "..", "..", "lnviz", "ui", "live");
vm.runInThisContext(readFileSync(join(live, "plots.js"), "utf8"), {filename: "plots.js"});
const cases = JSON.parse(readFileSync(process.env.LIVE_CASES || join(here, "live_cases.json"),
                                      "utf8")).plots;
const number = (v) => (typeof v === "string" ? Number(v) : v); // "NaN", "Infinity", "-Infinity"

for (const c of cases.histograms) {
  test(`histogram and colour range: ${c.name}`, () => {
    const values = c.values.map(number);
    const [centres, counts] = histogram(values);
    assert.deepEqual(counts, c.counts.map(number));  // the same bins: counts exactly
    assert.equal(centres.length, c.centres.length);
    centres.forEach((v, i) => {
      const want = number(c.centres[i]);
      assert.ok(Math.abs(v - want) <= 1e-12 * Math.abs(want) + 1e-300, `centre ${i}: ${v} ${want}`);
    });
    assert.deepEqual(symmetricRange(values), c.range.map(number));
  });
}

test("colorbar labels are Python's .2g", () => {
  for (const {value, text} of cases.labels) assert.equal(formatG(number(value), 2), text);
});

// Scale and shift: the browser's histogram of γ·x̂ + β equals lnviz's count for count, and the
// figure it redraws (bars, mean and mean ± std lines, title) is lnviz's figure for lnviz's numbers.
vm.runInThisContext(readFileSync(join(live, "norms.js"), "utf8"), {filename: "norms.js"});
for (const c of cases.affine) {
  test(`scale and shift's histogram and figure: ${c.name}`, () => {
    const data = {eps: c.eps, span: c.span, bins: c.bins, figure: {data: [{x: c.barsX}]}};
    const ours = affineNumbers(Float64Array.from(c.x), c.gamma, c.beta, data);
    assert.deepEqual(ours.counts, c.counts);
    assert.ok(Math.abs(ours.mean - c.mean) <= 1e-6 * (1 + Math.abs(c.mean)), `${ours.mean}`);
    assert.ok(Math.abs(ours.std - c.std) <= 1e-6 * (1 + c.std), `${ours.std}`);
    const lnviz = {gamma: c.gamma, beta: c.beta, counts: c.counts, mean: c.mean, std: c.std};
    const [traces, update, layout] = UPDATES.affine(lnviz, data);
    assert.deepEqual(traces, [0, 1, 2, 3]);
    assert.deepEqual(update.y[0], c.counts);
    assert.deepEqual(update.x[0], c.barsX);
    c.lines.forEach(([x, y], k) => {
      assert.deepEqual(update.x[k + 1], x);
      y.forEach((v, i) => assert.ok(Math.abs(update.y[k + 1][i] - v) <= 1e-12 * (1 + v)));
    });
    assert.equal(layout["title.text"], c.title);
  });
}

// The ε page: moved to any ε the control offers, the sweep figure's "chosen ε" lines are what
// lnviz draws at that ε (position, name, hidden at ε = 0).
for (const c of cases.sweepFigure) {
  test(`the sweep figure's chosen-ε lines: ${c.name}`, () => {
    const [traces, update] = UPDATES.sweep({eps: c.eps}, {figure: c.from});
    assert.equal(traces.length, c.lines.length);
    c.lines.forEach((line, k) => {
      assert.equal(update.name[k], line.name);
      assert.equal(update.visible[k], line.visible);
      assert.equal(update.hovertemplate[k], line.hovertemplate);
      if (line.visible) assert.deepEqual(update.x[k], line.x);
    });
  });
}

// BatchNorm vs LayerNorm: the re-draws figure built at one batch size and moved to lnviz's
// numbers at another is lnviz's figure there (lines, hidden BatchNorm and the refusal at 1).
const decodeY = (y) => (y && y.bdata
  ? Array.from(new ({f4: Float32Array, f8: Float64Array})[y.dtype](
    Uint8Array.from(Buffer.from(y.bdata, "base64")).buffer))
  : y.map(number));
for (const c of cases.redraws) {
  test(`the re-draws figure: ${c.name}`, () => {
    const live = {batchNorm: c.batchNorm && Float64Array.from(c.batchNorm.map(number)),
                  layerNorm: Float64Array.from(c.layerNorm.map(number))};
    const [traces, update, layout] = UPDATES.redraws(live, {figure: c.from});
    assert.deepEqual(traces, c.ys.map((_, i) => i));
    assert.deepEqual(update.visible, c.visible);
    c.ys.forEach((y, i) => {
      const want = decodeY(y);
      update.y[i].forEach((v, k) => {
        if (Number.isNaN(want[k])) assert.ok(Number.isNaN(v));
        else assert.ok(Math.abs(v - want[k]) <= 1e-6 * (1 + Math.abs(want[k])), `${i} ${k}`);
      });
    });
    const notice = c.from.layout.annotations.findIndex((a) => a.name === "refusal");
    assert.equal(layout[`annotations[${notice}].visible`], c.refused);
    assert.equal(layout["xaxis.visible"], !c.refused);
  });
}

test("a mean that rounds to zero is titled 0.000, as lnviz titles it", () => {
  const data = {figure: {data: [{x: [0]}]}};
  const [, , layout] = UPDATES.affine({gamma: 1, beta: 0, counts: [3], mean: -1e-5, std: 1}, data);
  assert.equal(layout["title.text"], "γ = 1, β = 0 → mean 0.000, std 1.000");
});

// The controls' labels (common.js): a value on the slider's steps with one decimal, any other as
// it is, however close to a step (a link's 1e-20 is not 0.0).
vm.runInThisContext(readFileSync(join(live, "common.js"), "utf8"), {filename: "common.js"});
test("a control labels a value off its steps as it is", () => {
  assert.equal(stepLabel(0.3), "0.3");
  assert.equal(stepLabel(-1.5), "−1.5");
  assert.equal(stepLabel(2), "2.0");
  assert.equal(stepLabel(0.15), "0.15");
  assert.equal(stepLabel(1e-20), "1e−20");
  assert.equal(stepLabel(0.123456789012), "0.123456789012");
});

// The Explorer's step-by-step table: sent at one setting and moved by the browser's numbers at
// another (norms.js), its moving columns are lnviz's table at the second setting; a cell writes a
// number as Python's .6g does.
for (const c of cases.steps.cases) {
  test(`step-by-step table follows: ${c.name}`, () => {
    const p = {...c.problem, x: Float64Array.from(c.problem.x.map(number))};
    for (const k of ["groupIds", "paramIds", "positions"]) {
      if (p[k]) p[k] = Int32Array.from(p[k]);
    }
    const r = liveNormalize(p);
    const live = {xHat: r.xHat, y: r.y, eps: p.eps, gamma: p.gamma, beta: p.beta};
    const table = {...c.table, cells: stepCells(c.table.cells)};
    const moved = liveStepColumns(table, live);
    assert.deepEqual(Object.keys(moved).sort(), Object.keys(c.want).sort());
    for (const [name, values] of Object.entries(c.want)) {
      values.map(number).forEach((want, i) => {
        const got = moved[name][i];
        if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `${name}[${i}]: ${got}`);
        else assert.ok(Math.abs(got - want) <= 1e-9 * (1 + Math.abs(want)),
                       `${name}[${i}]: ${got} vs ${want}`);
      });
    }
  });
}

test("a step-by-step cell writes numbers as Python's .6g", () => {
  for (const {value, text} of cases.steps.texts) assert.equal(cellText(number(value)), text);
  assert.equal(cellText("(0, 1)"), "(0, 1)");
  assert.equal(cellText(true), "yes");
});
