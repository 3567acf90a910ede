"""Where the norm sits (lnviz.lessons.placement): the four placements on the Shapes lesson's
stack at initialization, and QK-norm on all-MiniLM-L6-v2's real queries and keys.

Each placement's block is checked against the same block written with torch's own LayerNorm
(``torch.nn.functional.layer_norm``, someone else's code), and against what it must do whatever
the weights: a normalized sublayer's scale cannot reach the stream. QK-norm's attention is
checked against the model's own attention at c = 1 and against the rule that a sharper softmax
never has more entropy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lnviz.analysis import StackConfig
from lnviz.lessons.beyond import run_sentence
from lnviz.lessons.common import apart, defined, short
from lnviz.lessons.minilm import PRESETS
from lnviz.lessons.placement import (
    GAINS,
    QK_EPS,
    attention_scaling,
    gain_sensitivity,
    grows_faster,
    norm_change,
    normalized_adds,
    placement_findings,
    placements,
    steady_placements,
)
from lnviz.nn import PLACEMENTS, block, feed_forward, final_norm, init_block, self_attention


def _ln(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:])


def _reference(x: torch.Tensor, p: dict[str, torch.Tensor], variant: str) -> torch.Tensor:
    """Each placement written out with torch's LayerNorm (the sublayers are the lesson's)."""
    def attn(h: torch.Tensor) -> torch.Tensor:
        return self_attention(h, p)

    def ffn(h: torch.Tensor) -> torch.Tensor:
        return feed_forward(h, p)

    if variant == "post-LN":
        h = _ln(x + attn(x))
        return _ln(h + ffn(h))
    if variant == "pre-LN":
        h = x + attn(_ln(x))
        return h + ffn(_ln(h))
    if variant == "Peri-LN":
        h = x + _ln(attn(_ln(x)))
        return h + _ln(ffn(_ln(h)))
    if variant == "OLMo-2":
        h = x + _ln(attn(x))
        return h + _ln(ffn(h))
    h = x + attn(x)
    return h + ffn(h)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), gain=st.sampled_from(GAINS))
def test_every_placement_matches_the_block_written_with_torchs_layer_norm(seed: int,
                                                                         gain: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 16, generator=generator, dtype=torch.float64)
    params = init_block(16, gain, generator)
    for variant in PLACEMENTS:
        ours = block(x, params, variant)[0]
        theirs = _reference(x, params, variant)
        scale = float(theirs.abs().max())
        assert (ours - theirs).abs().max() <= 1e-10 * max(scale, 1.0), variant


def test_a_placement_that_normalizes_what_it_adds_ignores_the_scale_of_the_sublayer() -> None:
    # W_o and W_2 scaled by 10: Peri-LN's and OLMo-2's blocks do not change (but for ε, whose
    # share of σ² the scaling shrinks: within 1e-3), pre-LN's does
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 16, generator=generator, dtype=torch.float64)
    params = init_block(16, 1.0, generator)
    louder = dict(params, wo=10 * params["wo"], w2=10 * params["w2"], b2=10 * params["b2"])
    for variant in ("Peri-LN", "OLMo-2"):
        assert torch.allclose(block(x, params, variant)[0], block(x, louder, variant)[0],
                              rtol=0, atol=1e-3), variant
    assert (block(x, params, "pre-LN")[0] - block(x, louder, "pre-LN")[0]).abs().max() > 1
    # the final norm: on every placement that leaves the stream un-normalized, not post-LN's
    h = 5 * x
    for variant in ("pre-LN", "Peri-LN", "OLMo-2"):
        assert final_norm(h, variant).square().mean().sqrt() == pytest.approx(1.0, abs=1e-4)
    assert torch.equal(final_norm(h, "post-LN"), h) and torch.equal(final_norm(h, "none"), h)


def test_unknown_placement_is_refused_with_the_list() -> None:
    params = init_block(8, 1.0, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="Peri-LN"):
        block(torch.zeros(1, 2, 8, dtype=torch.float64), params, "sandwich")


@pytest.fixture(scope="module")
def default_stack() -> tuple:
    config = StackConfig(depth=12)
    return placements(config), gain_sensitivity(config)


def test_what_each_placement_does_to_the_stream_at_initialization(default_stack) -> None:
    result, sensitivity = default_stack
    depth = result.config.depth
    # post-LN: normalized last, variance 1 after every block, at every gain
    assert np.allclose(result.variance["post-LN"][1:], 1.0, atol=1e-4)
    assert np.allclose(sensitivity["post-LN"], 1.0, atol=1e-4)
    # Peri-LN and OLMo-2 add normalized vectors (RMS 1): the stream grows by about 2 per block
    for variant in ("Peri-LN", "OLMo-2"):
        assert np.allclose(result.adds[variant], 1.0, atol=1e-4)
        growth = (result.variance[variant][-1] - result.variance[variant][0]) / depth
        assert 1.5 < growth < 2.5, (variant, growth)
    low, high = normalized_adds(result)
    assert 1.5 < low <= high < 2.5
    # pre-LN's growth follows the weights' scale, Peri-LN's does not
    assert sensitivity["pre-LN"][-1] > 20 * sensitivity["pre-LN"][0]
    assert set(steady_placements(sensitivity)) == {"post-LN", "Peri-LN", "OLMo-2"}
    assert grows_faster(sensitivity, "pre-LN", "Peri-LN") == "pre-LN"
    assert grows_faster(sensitivity, "Peri-LN", "OLMo-2") is None
    # the gains are the lesson's: the sensitivity at gain 1 is the stack's own last variance
    assert sensitivity["pre-LN"][GAINS.index(1.0)] == pytest.approx(
        result.variance["pre-LN"][-1], rel=1e-12)


def test_the_gradients_are_autograds_through_the_final_norm(default_stack) -> None:
    result, _ = default_stack
    config = result.config
    # block 1's gradient of Peri-LN, recomputed here with torch's LayerNorm throughout
    from lnviz import analysis

    x0, stack = analysis._stack(config)
    params = [{k: w.clone().requires_grad_() for k, w in p.items()} for p in stack]
    x = x0
    for p in params:
        x = _reference(x, p, "Peri-LN")
    draw = torch.Generator().manual_seed(config.seed + 1)
    head = torch.randn(analysis.HEAD_CLASSES, config.d_model, generator=draw,
                       dtype=torch.float64) / math.sqrt(config.d_model)
    labels = torch.randint(analysis.HEAD_CLASSES, (config.batch, config.seq_len), generator=draw)
    logits = _ln(x) @ head.T
    F.cross_entropy(logits.reshape(-1, analysis.HEAD_CLASSES), labels.reshape(-1)).backward()
    first = math.sqrt(sum(float(p.grad.square().sum()) for p in params[0].values()))
    assert result.gradient["Peri-LN"][0] == pytest.approx(first, rel=1e-6)


def test_the_findings_print_the_numbers_of_the_run(default_stack) -> None:
    result, sensitivity = default_stack
    notes = placement_findings(result, sensitivity)
    assert len(notes) == len(PLACEMENTS)
    pre = notes[PLACEMENTS.index("pre-LN")]
    grad = result.gradient["pre-LN"]
    assert f"{result.variance['pre-LN'][-1]:.3g}" in pre
    assert f"block 1's gradient norm is {grad[0]:.3g}" in pre
    assert f"at {GAINS[-1]:g} {sensitivity['pre-LN'][-1]:.3g}" in pre


def test_an_overflowing_stack_is_named_not_printed_as_nan() -> None:
    config = StackConfig(depth=48, init_gain=10.0, d_model=16, seq_len=4, batch=1)
    result = placements(config)
    sensitivity = {v: np.array([1.0, np.nan]) for v in PLACEMENTS}
    notes = placement_findings(result, sensitivity)
    assert not any("nan" in n for n in notes)
    assert "overflowed" in notes[PLACEMENTS.index("none")]


# --- QK-norm ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    from lnviz.models import minilm

    return minilm()


@pytest.fixture(scope="module")
def run(model):
    return model.run(PRESETS[0])


def test_at_c_1_without_qk_norm_it_is_the_models_own_attention(model, run) -> None:
    lighter = run_sentence(model, PRESETS[0])  # what the page keeps: no attention maps
    assert lighter.attention is None
    for layer, head in ((0, 0), (3, 7), (5, 11)):
        scaling = attention_scaling(model, lighter, layer, head, 1.0)
        own = run.attention[layer, head].double().numpy()
        assert np.abs(scaling.attention["without"] - own).max() < 1e-5
        assert np.allclose(scaling.attention["without"].sum(-1), 1.0, atol=1e-12)


@settings(max_examples=8, deadline=None)
@given(layer=st.integers(0, 5), head=st.integers(0, 11), scale=st.floats(0.25, 32.0))
def test_entropy_falls_without_qk_norm_and_holds_with_it(model, run, layer: int, head: int,
                                                         scale: float) -> None:
    scaling = attention_scaling(model, run, layer, head, scale)
    without, with_norm = scaling.entropy["without"], scaling.entropy["with"]
    assert np.all(np.diff(without) <= 1e-9)  # a sharper softmax never has more entropy
    assert without[0] > 0.9 * scaling.uniform > without[-1] + 1.0
    assert np.ptp(with_norm) < 1e-3
    assert scaling.largest_logit["with"] <= scaling.bound + 1e-9
    # with QK-norm: torch's LayerNorm over each head's 32 dims, then q̂·k̂/√32
    config = model.config
    hs = config.n_embd // config.n_head
    x = run.records[2 * layer].output[0].double()
    prefix = f"encoder.layer.{layer}.attention.self"
    rows = slice(head * hs, (head + 1) * hs)
    w = model.weights
    q = F.linear(x, w[f"{prefix}.query.weight"][rows].double(),
                 w[f"{prefix}.query.bias"][rows].double())
    k = F.linear(x, w[f"{prefix}.key.weight"][rows].double(),
                 w[f"{prefix}.key.bias"][rows].double())
    theirs = (F.layer_norm(scale * q, (hs,), eps=QK_EPS)
              @ F.layer_norm(scale * k, (hs,), eps=QK_EPS).T / math.sqrt(hs)).softmax(-1)
    assert np.abs(scaling.attention["with"] - theirs.numpy()).max() < 1e-9


def test_bad_layer_head_or_scale_is_refused(model, run) -> None:
    with pytest.raises(ValueError, match="heads 0 to 11"):
        attention_scaling(model, run, 0, 12, 1.0)
    with pytest.raises(ValueError, match="> 0"):
        attention_scaling(model, run, 0, 0, 0.0)


# --- The page ---------------------------------------------------------------------------------
PAGE = "app_pages/placement.py"


def test_the_page_asks_before_it_shows_and_prints_the_lessons_numbers(model) -> None:
    from pageutil import decode, figures, open_page

    at = open_page(PAGE, {"pl_depth": "12", "pl_gain": "2.0"}, timeout=120)
    assert not figures(at)
    # QK-norm's set-up does not say what happens to the attention: its reveal does
    shown = " ".join(e.value for e in [*at.markdown, *at.caption])
    assert "ViT-22B" in shown and "one-hot" not in shown and "entropy near 0" not in shown
    at.radio(key="pl_guess").set_value("both alike").run()
    assert not at.exception, at.exception
    verdict = next(m.value for m in at.markdown if "stream variance is" in m.value)
    assert verdict.startswith("**Not quite:**")
    config = StackConfig(depth=12, init_gain=2.0)
    result, sensitivity = placements(config), gain_sensitivity(config)
    assert f"{sensitivity['pre-LN'][-1]:.3g} at gain 2" in verdict
    (grid,) = figures(at)
    assert len(grid["data"]) == 2 * len(PLACEMENTS)
    top = decode(grid["data"][2]["y"])  # pre-LN's stream variance
    assert np.allclose(top, result.variance["pre-LN"], rtol=1e-6)
    findings = next(m.value for m in at.markdown if m.value.startswith("- **post-LN**"))
    assert findings == "\n".join(f"- {n}" for n in placement_findings(result, sensitivity))
    # Peri-LN's growth: 2 per block for vectors unrelated to the stream, the rest their
    # alignment, measured; the gain barely moves it, as the table measures (both steady)
    low, high = normalized_adds(result)
    caption = next(c.value for c in at.caption if "Post-LN's stream" in c.value)
    assert (f"would grow by exactly 2 per block (two sublayers). Here it grows by {low:.2f} to "
            f"{high:.2f}, the rest being how those vectors line up") in caption
    assert "the gain barely moves it" in caption and "close to 2 at any gain" not in caption
    # QK-norm: the guess, then the curve and the two attentions at the chosen scale
    at.select_slider(key="pl_scale").set_value(16.0).run()
    at.radio(key="pl_qk_guess").set_value("piles onto fewer tokens").run()
    assert not at.exception, at.exception
    assert len(figures(at)) == 3
    scaling = attention_scaling(model, model.run(PRESETS[0]), 0, 0, 16.0)
    caption = next(c.value for c in at.caption if "largest |logit|" in c.value)
    assert f"{scaling.largest_logit['without']:.3g} without QK-norm" in caption
    assert any(m.value.startswith("**Right:**") and "piles" not in m.value
               and defined("nats") in m.value for m in at.markdown)


def test_the_page_takes_another_head_and_a_sentence_of_its_own(model) -> None:
    from pageutil import figures, open_page

    at = open_page(PAGE, {"pl_text": "Queries and keys.", "pl_layer": "5", "pl_head": "11"},
                   timeout=120)
    at.radio(key="pl_qk_guess").set_value("stays as it is").run()
    assert not at.exception, at.exception
    verdict = next(m.value for m in at.markdown if "entropy only falls" in m.value)
    assert verdict.startswith("**Not quite:** the answer is “piles onto fewer tokens”.")
    assert len(figures(at)) == 2  # the placements still wait for their guess
    # that a norm removes the scale of what feeds it is section 1's answer in part (the 30th
    # review): said in section 2 once section 1 is answered
    caption = next(c.value for c in at.caption if "largest |logit|" in c.value)
    assert "LN(c·q) = LN(q)" not in verdict and "cannot grow with W_q" not in caption
    at.radio(key="pl_guess").set_value("pre-LN's").run()
    verdict = next(m.value for m in at.markdown if "entropy only falls" in m.value)
    caption = next(c.value for c in at.caption if "largest |logit|" in c.value)
    assert "LN(c·q) = LN(q) for any c > 0" in verdict and "cannot grow with W_q" in caption
    scaling = attention_scaling(model, model.run("Queries and keys."), 5, 11, 1.0)
    caption = next(c.value for c in at.caption if "largest |logit|" in c.value)
    assert f"{scaling.largest_logit['without']:.3g} without QK-norm" in caption
    assert f"uniform over the {len(scaling.tokens)} tokens: {scaling.uniform:.3f}" in verdict
    at.text_area(key="pl_text").set_value("").run()
    assert not at.exception and not at.error


def test_the_gain_table_prints_three_digits_and_names_an_overflow() -> None:
    from lnviz.lessons.placement import gain_table

    table = gain_table({"pre-LN": np.array([1.23456, 7.1e21]), "none": np.array([13.0, np.nan])},
                       gains=(0.5, 2.0))
    assert table.loc["pre-LN"].tolist() == ["1.23", "7.1e+21"]
    assert table.loc["none"].tolist() == ["13", "overflowed"]


# --- Before a norm: the weight's scale ------------------------------------------------------------


def test_the_weights_scale_is_invisible_and_its_gradient_orthogonal() -> None:
    from lnviz.lessons.placement import ScaleConfig, scale_run

    config = ScaleConfig(steps=60, eps=1e-12)
    run = scale_run(config)
    assert np.abs(run.gradient_cosine).max() < 1e-8
    # sideways steps only lengthen W: ‖W_{t+1}‖² = ‖W_t‖² + η²‖∇‖²
    growth = np.diff(run.weight_norm ** 2)
    assert np.allclose(growth, config.lr ** 2 * run.gradient_norm ** 2, rtol=1e-6, atol=0)
    assert np.all(growth > 0)
    # the effective step: ‖ΔW‖/‖W‖ = η‖∇‖/‖W‖ without decay
    assert np.allclose(run.angular_step, config.lr * run.gradient_norm / run.weight_norm[:-1])


def test_a_larger_w_learns_slower_and_weight_decay_gives_it_back_its_rate() -> None:
    from lnviz.lessons.placement import learns, scale_runs

    runs = scale_runs(10.0, 0.03)
    reference, plain, decayed = runs.values()
    assert plain.effective_lr[0] == pytest.approx(reference.effective_lr[0] / 100, rel=1e-9)
    assert learns(plain, reference) == "slower"
    assert plain.smoothed_loss()[-1] > 2 * reference.smoothed_loss()[-1]  # 0.34 against 0.07
    assert decayed.weight_norm[-1] < 0.5 * decayed.weight_norm[0]
    assert decayed.effective_lr[-1] > 4 * plain.effective_lr[-1]
    assert decayed.smoothed_loss()[-1] < plain.smoothed_loss()[-1]
    assert len(scale_runs(1.0, 0.0)) == 1  # the three coincide


def test_the_run_is_torchs_sgd_with_weight_decay_on_w_alone() -> None:
    from lnviz.lessons import placement
    from lnviz.lessons.placement import ScaleConfig, scale_run

    config = ScaleConfig(init_scale=3.0, weight_decay=0.01, steps=40)
    ours = scale_run(config)
    x_train, y_train, x_test, y_test = placement._digits()
    generator = torch.Generator().manual_seed(config.seed)
    w = torch.randn(config.hidden, 64, generator=generator, dtype=torch.float64) / 8 * 3.0
    head = torch.randn(10, config.hidden, generator=generator,
                       dtype=torch.float64) / math.sqrt(config.hidden)
    model = torch.nn.Sequential(torch.nn.Linear(64, config.hidden, bias=False),
                                torch.nn.LayerNorm(config.hidden, elementwise_affine=False,
                                                   eps=config.eps),
                                torch.nn.ReLU(), torch.nn.Linear(config.hidden, 10)).double()
    with torch.no_grad():
        model[0].weight.copy_(w)
        model[3].weight.copy_(head)
        model[3].bias.zero_()
    optimizer = torch.optim.SGD([
        {"params": [model[0].weight], "weight_decay": config.weight_decay},
        {"params": list(model[3].parameters()), "weight_decay": 0.0}], lr=config.lr)
    batches = torch.Generator().manual_seed(config.seed + 1)
    for _ in range(config.steps):
        rows = torch.randint(len(y_train), (config.batch,), generator=batches)
        optimizer.zero_grad()
        F.cross_entropy(model(x_train[rows]), y_train[rows]).backward()
        optimizer.step()
    assert float(model[0].weight.detach().norm()) == pytest.approx(ours.weight_norm[-1], rel=1e-9)
    with torch.no_grad():
        accuracy = float((model(x_test).argmax(-1) == y_test).double().mean())
    assert accuracy == pytest.approx(ours.test_accuracy)


def test_the_page_trains_after_a_guess_and_prints_the_runs_numbers() -> None:
    from pageutil import figures, open_page

    from lnviz.lessons.placement import scale_runs

    at = open_page(PAGE, {"pl_wscale": "10.0", "pl_decay": "0.01"}, timeout=120)
    # its premise (the output does not change with W's scale) is section 1's answer in part:
    # the question waits for section 1's (the 32nd review)
    assert not [r for r in at.radio if r.key == "pl_scale_guess"]
    assert any("This part's question waits for section 1's" in c.value for c in at.caption)
    at.radio(key="pl_guess").set_value("Peri-LN's").run()
    assert any("Pick an answer to see the runs" in c.value for c in at.caption)
    # the effective rate η/‖W‖², the answer, comes after
    shown = " ".join(e.value for e in [*at.markdown, *at.caption])
    assert "η/‖W‖²" not in shown
    at.radio(key="pl_scale_guess").set_value("slower").run()
    assert not at.exception, at.exception
    runs = scale_runs(10.0, 0.01)
    reference, plain, decayed = runs.values()
    verdict = next(m.value for m in at.markdown
                   if "effective learning rate" in m.value and "starts at" in m.value)
    assert verdict.startswith("**Right:** Slower, by its training loss")
    assert defined("effective learning rate") in verdict
    why = next(m.value for m in at.markdown if m.value.startswith("Why: "))
    assert "effective rate η/‖W‖²" in why
    scope = next(c.value for c in at.caption if "Where this holds" in c.value)
    assert "a bias added after W breaks" in scope
    assert "does not cover pre-LN's W_o" in scope and "under OLMo 2's reordered norm" in scope
    assert any("LN(c·Wx) = LN(Wx) for every c > 0" in m.value for m in at.markdown)
    assert f"{plain.smoothed_loss()[-1]:.3f} against {reference.smoothed_loss()[-1]:.3f}" in verdict
    notes = next(m.value for m in at.markdown if m.value.startswith("- The gradient"))
    # the decayed run's ‖W‖ beside the undecayed one's: decay makes it grow less, not grow
    assert ("With weight decay 0.01, ‖W‖ goes from {} to {}".format(
        *apart(decayed.weight_norm[0], decayed.weight_norm[-1]))
        + f" ({short(plain.weight_norm[-1])} without decay)") in notes
    for run in (reference, plain):  # without decay: ‖W‖'s growth, in digits that show it
        first, last = norm_change(run.weight_norm).split(" (")[0].split(" → ")
        assert first != last and f"{norm_change(run.weight_norm)} at scale" in notes
    (chart,) = [f for f in figures(at) if len(f["data"]) == 9]  # 3 runs × 3 panels
    assert chart["data"][0]["name"] == "scale 1, no decay"
    # at scale 1 the run is the reference itself: nothing to predict, so no question (the
    # 28th review), and the text says it is the same run
    at.select_slider(key="pl_wscale").set_value(1.0).run()
    assert not [r for r in at.radio if r.key == "pl_scale_guess"]
    assert any("nothing to predict" in c.value for c in at.caption)
    verdict = next(m.value for m in at.markdown if "effective learning rate" in m.value)
    assert verdict.startswith("At scale 1 W starts at its usual size: it is the same run")
    assert "against" not in verdict


@given(st.floats(0.01, 1e6), st.floats(-0.05, 0.05))
def test_two_numbers_side_by_side_read_differently_when_they_differ(before, change):
    """apart(): a change as small as the sentence's weight norms' (0.01 %) still shows, and the
    printed numbers are the numbers to their digits."""
    after = before * (1 + change)
    a, b = apart(before, after)
    assert (a != b) == (before != after)
    # three significant digits at least: within half a unit of the third
    assert float(a.replace("−", "-")) == pytest.approx(before, rel=5e-3)
    assert float(b.replace("−", "-")) == pytest.approx(after, rel=5e-3)


def test_a_weight_norms_change_is_printed_so_that_it_shows():
    assert norm_change(np.array([10.04, 10.0412])) == "10.04 → 10.041 (+0.012 %)"
    assert norm_change(np.array([2.0, 1.0])) == "2 → 1 (−50 %)"
    assert apart(1.0, 1.0) == ("1", "1")


# --- Section 1 in training: pre-LN against Peri-LN --------------------------------------------


def test_a_peri_ln_race_records_the_weights_and_the_stream_as_they_are_before_each_step() -> None:
    """Peri-LN trains with its output norms (γ and β of its own); before the first step ‖W‖ is
    the norm of the freshly drawn block matrices and the stream's mean square is that of the
    first batch through the untrained model, computed here from the same seed and batch."""
    from lnviz.lessons.shapes import RACE_VOCAB
    from lnviz.train import (
        BLOCK_MATRICES,
        RACE_SEQ_LEN,
        Race,
        RaceConfig,
        init_race_model,
        race_stream,
    )

    config = RaceConfig(entrants=("pre-LN", "Peri-LN"), depth=2, steps=3, seeds=1, seed=4)
    race = Race(config)
    race.advance(3)
    result = race.result()
    for entrant in config.entrants:
        fresh = init_race_model(config, entrant, 4)
        assert ("ln1o_weight" in fresh["blocks"][0]) == (entrant == "Peri-LN")
        norm = math.sqrt(sum(float(torch.linalg.matrix_norm(b[name]) ** 2)
                             for b in fresh["blocks"] for name in BLOCK_MATRICES))
        curve = result.curves[entrant]
        assert curve["weight norm"][0] == pytest.approx(norm, rel=1e-6)
        tokens = torch.randint(RACE_VOCAB, (config.batch, RACE_SEQ_LEN),
                               generator=torch.Generator().manual_seed(5))  # the seed + 1
        with torch.no_grad():
            stream = race_stream(fresh, tokens)
        assert curve["stream"][0] == pytest.approx(float(stream.double().square().mean()),
                                                   rel=1e-5)
        assert len(curve["weight norm"]) == len(curve["stream"]) == 3
        assert curve["weight norm"][1] != curve["weight norm"][0]  # Adam moved the weights


def _result(pre: tuple[float, float], peri: tuple[float, float], weights=(83.15, 85.6),
            gain=(1.0, 1.002)):
    """A finished two-step race's curves: the stream's mean square first and last, and
    Peri-LN's output norms' γ (pre-LN has none)."""
    from lnviz.lessons.placement import GROWTH_RACE
    from lnviz.train import RaceResult

    curves = {name: {"loss": [2.0, 1.0], "accuracy": [0.1, 0.9], "weight norm": list(weights),
                     "stream": list(stream), "output gain": list(gains)}
              for name, stream, gains in (("pre-LN", pre, (math.nan, math.nan)),
                                          ("Peri-LN", peri, gain))}
    return RaceResult(GROWTH_RACE, curves, 2, False, 1.0)


def test_the_growth_text_reads_the_race() -> None:
    """The measured run's numbers (12 blocks, 300 steps, seed 0: pre-LN 13.8 → 205, Peri-LN
    28.7 → 105, ‖W‖ 83.15 → 85.6), and the other way the comparison can fall."""
    from lnviz.lessons.placement import growth_text

    text = growth_text(_result((13.78, 204.8), (28.72, 105.3)))
    assert "pre-LN's ‖W‖ went from 83.15 to 85.6" in text
    assert "from 13.8 to 205 (14.9×)" in text and "from 28.7 to 105 (3.67×)" in text
    assert "barely moved (at most 2.9%)" in text
    assert ("Peri-LN's stream grew less (3.67× against 14.9×) and ends smaller (105 against "
            "205), from a start above pre-LN's.") in text
    # Peri-LN's growth split: γ barely moved (the reviewed run: RMS 0.994-1.004), so the
    # stream's 3.67× is the added vectors lining up, not γ
    assert ("only its output norms' γ (RMS 1 → 1.002, about 1× in the mean square) and β, "
            "or those added vectors lining up") in text
    assert "the stream's 3.67× is nearly all that lining up" in text
    assert text.endswith("not a measurement of it.")
    grown = growth_text(_result((10.0, 20.0), (10.0, 80.0), weights=(80.0, 120.0),
                                gain=(1.0, 2.0)))
    assert "The weights grew by up to 50%" in grown and "pre-LN's stream grew less" in grown
    assert "about 4× in the mean square" in grown and "nearly all" not in grown


def test_the_race_records_the_output_norms_gamma() -> None:
    """Peri-LN's output norms start at γ = 1 (RMS 1) and move with training; pre-LN has none
    (NaN); output_gain is the RMS of those γ, as computed here from the model."""
    from lnviz.train import Race, RaceConfig, output_gain

    race = Race(RaceConfig(entrants=("pre-LN", "Peri-LN"), depth=2, steps=6, seeds=1))
    race.advance(6)
    curves = race.curves()
    assert all(math.isnan(g) for g in curves["pre-LN"]["output gain"])
    gains = curves["Peri-LN"]["output gain"]
    assert gains[0] == pytest.approx(1.0) and len(gains) == 6 and gains[-1] != gains[0]
    model = next(r.model for r in race.runners if r.entrant == "Peri-LN")
    gammas = torch.cat([p[k].detach().double() for p in model["blocks"]
                        for k in ("ln1o_weight", "ln2o_weight")])
    assert output_gain(model) == pytest.approx(float(gammas.square().mean().sqrt()))


def test_the_page_trains_pre_ln_and_peri_ln_and_says_what_grew(monkeypatch) -> None:
    """Section 1's training on the page, on request (a two-block, five-step race here: the
    figure and the sentence are the page's for any race)."""
    from pageutil import figures, open_page

    import lnviz.lessons.placement as lesson
    from lnviz.train import RaceConfig

    tiny = RaceConfig(entrants=("pre-LN", "Peri-LN"), depth=2, steps=5, seeds=1)
    monkeypatch.setattr(lesson, "GROWTH_RACE", tiny)
    at = open_page(PAGE, {"pl_depth": "6"}, timeout=120)
    at.radio(key="pl_guess").set_value("Peri-LN's").run()
    assert any("Press **Run** to train them" in i.value for i in at.info)
    at.button(key="pl_race_run").click().run(timeout=120)
    assert not at.exception, at.exception
    growth = next(f for f in figures(at)
                  if f["layout"]["annotations"][0]["text"].startswith("‖W‖"))
    assert [t["name"] for t in growth["data"]] == ["pre-LN", "pre-LN", "Peri-LN", "Peri-LN"]
    shown = " ".join(m.value for m in at.markdown)
    assert "Over 5 steps, pre-LN's ‖W‖ went from" in shown
    assert "One seed and one small task" in shown
