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
