// lnviz.ui.live's arithmetic (norms.js) against the numbers lnviz computes for the same problems.
// The cases come from tools/live_fixtures.py (tests/test_live.py writes them afresh and runs this
// file): every norm and layout, ε = 0, negative and per-feature γ and β, BatchNorm in eval mode
// and with its mask, the ε page's sweep (x̂ and ∂L/∂x of one vector), and the batch panel's
// re-drawn batches (batches.js).
import assert from "node:assert/strict";
import {readFileSync} from "node:fs";
import {dirname, join} from "node:path";
import {test} from "node:test";
import {fileURLToPath} from "node:url";
import vm from "node:vm";

const here = dirname(fileURLToPath(import.meta.url));
const live = join(here, "..", "..", "lnviz", "ui", "live");
// norms.js declares plain functions, as the page loads it: run as a script, they are globals
vm.runInThisContext(readFileSync(join(live, "norms.js"), "utf8"), {filename: "norms.js"});
const cases = JSON.parse(readFileSync(process.env.LIVE_CASES || join(here, "live_cases.json"),
                                      "utf8"));

const number = (v) => (typeof v === "string" ? Number(v) : v); // "NaN", "Infinity", "-Infinity"

/** Equal where both are finite (within tol(i), absolute), NaN or ±inf at the same places. */
function close(ours, theirs, tol, what) {
  const expected = Array.from(theirs, number);
  assert.equal(ours.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = ours[i];
    const b = expected[i];
    if (Number.isNaN(a) && Number.isNaN(b)) continue;
    if (a === b) continue;
    assert.ok(Math.abs(a - b) <= tol(i, b),
              `${what}: element ${i} of ${expected.length}: browser ${a}, lnviz ${b}`);
  }
}

for (const {name, problem, expected} of cases.norms) {
  test(`norms.js equals lnviz: ${name}`, () => {
    const p = {...problem, x: Float64Array.from(problem.x)};
    const r = liveNormalize(p);
    const after = liveGroupStats(r.y, r, p.norm);
    // the groups lnviz sends, or, for a table the browser groups itself, the same as lnviz's
    assert.deepEqual(Array.from(r.group), expected.group);
    for (const dtype of ["float64", "float32"]) {
      const e = expected[dtype];
      const atol = e.atol;
      const where = `${name} in ${dtype}`;
      const flat = () => atol;
      close(r.y, e.y, flat, `y, ${where}`);
      close(r.xHat, e.xHat, flat, `x̂, ${where}`);
      if (e.mean !== null) close(r.mean, e.mean, () => 10 * atol, `μ, ${where}`);
      else assert.equal(r.mean, null, `μ, ${where}: RMSNorm has none`);
      close(r.var, e.var, (i, b) => 10 * atol * Math.max(1, Math.abs(b)), `σ², ${where}`);
      close(r.rstd, e.rstd, (i, b) => atol * Math.max(1, Math.abs(b)), `rstd, ${where}`);
      close(after.mean, e.meanOut, flat, `μ after, ${where}`);
      close(after.spread, e.spreadOut, flat, `σ after, ${where}`);
    }
  });
}

for (const {name, x, g, eps, xHat, grad} of cases.sweep) {
  test(`the ε sweep's x̂ and ∂L/∂x equal lnviz's: ${name}`, () => {
    const r = liveLayerNormGrad(Float64Array.from(x), Float64Array.from(g), eps);
    const scale = Math.max(1, ...Array.from(grad, number).filter(Number.isFinite).map(Math.abs));
    close(r.xHat, xHat, () => 1e-9, `x̂, ${name}`);
    close(r.grad, grad, () => 1e-9 * scale, `∂L/∂x, ${name}`);
  });
}

// BatchNorm vs LayerNorm's batch panel (batches.js, as the page loads it: plain functions; its
// entry point, the module's default export, is left out): at every batch size a drag passes,
// the fixed sample's BatchNorm output in each re-draw's batch and its LayerNorm output equal
// lnviz's batch_dependence (lnviz in float32, the browser in float64 from the same float32
// mates), and at a batch of one BatchNorm refuses.
const batchesSource = readFileSync(join(live, "batches.js"), "utf8")
  .replace(/\nexport default function[\s\S]*$/, "\n");
vm.runInThisContext(batchesSource, {filename: "batches.js"});
const F32_ATOL = 2e-5;
for (const c of cases.batches) {
  test(`the batch panel's numbers equal lnviz's: ${c.name}`, () => {
    const state = {data: c.data, sample: Float64Array.from(c.sample),
                   mates: Float32Array.from(c.mates)};
    for (const want of c.sizes) {
      const got = batchNumbers(state, want.size);
      const where = `batch size ${want.size}`;
      assert.equal(got.batch, want.size);
      close(got.layerNorm, want.layerNorm, () => F32_ATOL, `LayerNorm, ${where}`);
      assert.equal(got.lnSpread, 0, `LayerNorm's change across re-draws, ${where}`);
      if (want.batchNorm === null) {
        assert.equal(got.batchNorm, null, `BatchNorm refuses, ${where}`);
        assert.ok(Number.isNaN(got.bnSpread));
      } else {
        close(got.batchNorm, want.batchNorm, () => F32_ATOL, `BatchNorm, ${where}`);
        assert.ok(Math.abs(got.bnSpread - number(want.bnSpread)) <= 2 * F32_ATOL, where);
      }
    }
  });
}

test("the cases cover every norm and the sweep", () => {
  const norms = new Set(cases.norms.map((c) => c.problem.norm));
  assert.deepEqual([...norms].sort(),
                   ["BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm", "RMSNorm"]);
  assert.ok(cases.sweep.length >= 6);
  assert.ok(cases.batches.some((c) => c.sizes.some((s) => s.batchNorm === null)));
});
