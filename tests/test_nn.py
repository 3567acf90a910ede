"""lnviz.nn against torch.nn, module by module: the same constructor arguments, state-dict keys
and outputs, in training and in evaluation mode, and BatchNorm's and InstanceNorm's running
statistics updated step by step as torch's; DyT against the paper's formula; lnviz.patch on
torch's and transformers' models; lnviz.capture recording lnviz.nn's modules."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import lnviz
import lnviz.nn as lnn

#: float64 throughout, so that the bound is the arithmetic's, not float32's rounding order
TOLERANCE = 1e-10


def _pair(ours: type, theirs: type, *args, **kwargs) -> tuple[nn.Module, nn.Module]:
    """The same module from lnviz and from torch, in float64, with γ and β (and running
    statistics, where kept) made non-trivial and equal."""
    generator = torch.Generator().manual_seed(0)
    reference = theirs(*args, **kwargs, dtype=torch.float64)
    with torch.no_grad():
        for tensor in list(reference.parameters()) + [
                b for n, b in reference.named_buffers() if n != "num_batches_tracked"]:
            tensor.copy_(torch.rand(tensor.shape, generator=generator, dtype=tensor.dtype)
                         + 0.5)
    module = ours(*args, **kwargs, dtype=torch.float64)
    module.load_state_dict(reference.state_dict())
    return module, reference


CASES = [
    (lnn.LayerNorm, nn.LayerNorm, (6,), {}, (4, 5, 6)),
    (lnn.LayerNorm, nn.LayerNorm, ((5, 6),), {"eps": 1e-3, "bias": False}, (4, 5, 6)),
    (lnn.LayerNorm, nn.LayerNorm, (6,), {"elementwise_affine": False}, (3, 6)),
    (lnn.RMSNorm, nn.RMSNorm, (6,), {}, (4, 5, 6)),
    (lnn.RMSNorm, nn.RMSNorm, ((5, 6),), {"eps": 1e-6}, (4, 5, 6)),
    (lnn.BatchNorm1d, nn.BatchNorm1d, (6,), {}, (8, 6)),
    (lnn.BatchNorm1d, nn.BatchNorm1d, (6,), {"momentum": None}, (8, 6, 5)),
    (lnn.BatchNorm1d, nn.BatchNorm1d, (6,), {"track_running_stats": False}, (8, 6, 5)),
    (lnn.BatchNorm2d, nn.BatchNorm2d, (3,), {"momentum": 0.3, "eps": 1e-3}, (4, 3, 5, 5)),
    (lnn.BatchNorm2d, nn.BatchNorm2d, (3,), {"affine": False}, (4, 3, 5, 5)),
    (lnn.GroupNorm, nn.GroupNorm, (2, 6), {}, (4, 6, 5)),
    (lnn.GroupNorm, nn.GroupNorm, (3, 6), {"affine": False}, (4, 6, 2, 3)),
    (lnn.InstanceNorm1d, nn.InstanceNorm1d, (6,), {}, (4, 6, 5)),
    (lnn.InstanceNorm1d, nn.InstanceNorm1d, (6,), {"affine": True, "track_running_stats": True},
     (4, 6, 5)),
    (lnn.InstanceNorm1d, nn.InstanceNorm1d, (6,), {"affine": True}, (6, 5)),  # unbatched
    (lnn.InstanceNorm2d, nn.InstanceNorm2d, (3,), {"affine": True, "track_running_stats": True,
                                                   "momentum": None}, (4, 3, 5, 5)),
    (lnn.InstanceNorm2d, nn.InstanceNorm2d, (3,), {}, (3, 5, 5)),  # unbatched
]


def _id(case: tuple) -> str:
    ours, _, args, kwargs, shape = case
    return f"{ours.__name__}{args}{kwargs or ''}{list(shape)}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_module_is_torchs_in_both_modes_step_by_step(case: tuple) -> None:
    """Three training steps, then evaluation: every output, the running statistics after each
    step and num_batches_tracked equal torch's; the state dicts have the same keys; the module
    is an instance of torch's class."""
    ours, theirs, args, kwargs, shape = case
    module, reference = _pair(ours, theirs, *args, **kwargs)
    assert isinstance(module, theirs)
    assert list(module.state_dict()) == list(reference.state_dict())
    generator = torch.Generator().manual_seed(1)
    for step in range(3):
        x = torch.randn(shape, generator=generator, dtype=torch.float64) * (step + 1) + step
        got, expected = module.train()(x), reference.train()(x)
        assert (got - expected).abs().max() < TOLERANCE, step
        for name, buffer in reference.named_buffers():
            theirs_now = buffer
            ours_now = dict(module.named_buffers())[name]
            assert torch.equal(ours_now, theirs_now) if name == "num_batches_tracked" else \
                (ours_now - theirs_now).abs().max() < TOLERANCE, (step, name)
    x = torch.randn(shape, generator=generator, dtype=torch.float64)
    got, expected = module.eval()(x), reference.eval()(x)
    assert (got - expected).abs().max() < TOLERANCE
    assert got.shape == expected.shape and got.dtype == expected.dtype


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (lnn.LayerNorm, lnn.GroupNorm)],
                         ids=_id)
def test_gradients_flow_as_torchs(case: tuple) -> None:
    ours, theirs, args, kwargs, shape = case
    module, reference = _pair(ours, theirs, *args, **kwargs)
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    upstream = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    grads = []
    for m in (module, reference):
        xi = x.clone().requires_grad_(True)
        (m(xi) * upstream).sum().backward()
        grads.append([xi.grad, *(p.grad for p in m.parameters())])
    for got, expected in zip(*grads, strict=True):
        assert (got - expected).abs().max() < 1e-9


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(2, 6), features=st.integers(1, 9), scale=st.floats(1e-3, 1e3),
       offset=st.floats(-1e3, 1e3), seed=st.integers(0, 2**16))
def test_layer_norm_matches_torch_on_any_input(rows: int, features: int, scale: float,
                                               offset: float, seed: int) -> None:
    module, reference = _pair(lnn.LayerNorm, nn.LayerNorm, features)
    x = torch.randn(rows, features, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(seed)) * scale + offset
    assert (module(x) - reference(x)).abs().max() < 1e-8


def test_the_fast_implementation_is_a_choice_outside_the_state_dict() -> None:
    scratch, reference = _pair(lnn.LayerNorm, nn.LayerNorm, 6)
    fast = lnn.LayerNorm(6, impl="fast", dtype=torch.float64)
    fast.load_state_dict(scratch.state_dict())
    assert fast.impl == "fast" and "impl" not in fast.state_dict()
    x = torch.randn(3, 6, dtype=torch.float64)
    assert (fast(x) - reference(x)).abs().max() < TOLERANCE


def test_a_torch_checkpoint_loads_into_lnviz_modules_and_back() -> None:
    """Swap every norm of a small CNN for lnviz's through the state dict: same outputs."""
    def cnn(norm2d, norm1d) -> nn.Sequential:
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), norm2d(4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 6 * 6, 5), norm1d(5)).double()

    theirs, ours = cnn(nn.BatchNorm2d, nn.BatchNorm1d), cnn(lnn.BatchNorm2d, lnn.BatchNorm1d)
    x = torch.randn(6, 3, 8, 8, dtype=torch.float64)
    theirs.train()(x)  # running statistics to carry over
    ours.load_state_dict(theirs.state_dict())
    assert (ours.eval()(x) - theirs.eval()(x)).abs().max() < 1e-10
    assert ours[1].num_batches_tracked == 1


def test_dyt_is_the_papers_formula_with_its_parameters() -> None:
    dyt = lnn.DyT(4, alpha=0.7)
    assert [n for n, _ in dyt.named_parameters()] == ["alpha", "weight", "bias"]
    assert dyt.alpha.shape == (1,) and float(dyt.alpha.detach()) == pytest.approx(0.7)
    assert torch.equal(dyt.weight, torch.ones(4)) and torch.equal(dyt.bias, torch.zeros(4))
    with torch.no_grad():
        dyt.weight.copy_(torch.tensor([1.0, -2.0, 0.5, 3.0]))
        dyt.bias.copy_(torch.tensor([0.0, 1.0, -1.0, 0.25]))
    x = torch.tensor([[-3.0, 0.0, 0.5, 10.0]])
    expected = torch.tensor([[1.0 * torch.tanh(torch.tensor(-2.1)), 1.0,
                              0.5 * torch.tanh(torch.tensor(0.35)) - 1.0,
                              3.0 * torch.tanh(torch.tensor(7.0)) + 0.25]])
    assert (dyt(x) - expected).abs().max() < 1e-6
    assert "alpha=0.7" in repr(dyt)


# --- lnviz.patch ------------------------------------------------------------------------------


def _encoder() -> nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def test_patch_replaces_the_named_norms_and_leaves_the_model_as_it_was() -> None:
    model = _encoder()
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(4))
    state = copy.deepcopy(model.state_dict())
    with torch.no_grad():
        plain = model(x)
        seen = []

        def identity(t: torch.Tensor) -> torch.Tensor:
            seen.append(t.shape)
            return t

        with lnviz.patch(model, {"layers.0.norm1": identity, "layers.1.norm2": identity}) as m:
            assert m is model
            patched = model(x)
        after = model(x)
    assert seen == [(2, 5, 8), (2, 5, 8)]
    assert (patched - plain).abs().max() > 0.1  # two norms gone: another output
    assert torch.equal(after, plain)
    assert all("forward" not in mod.__dict__ for mod in model.modules())
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_patch_undoes_itself_when_the_block_raises_and_refuses_unknown_names() -> None:
    model = _encoder()
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        plain = model(x)
        with pytest.raises(RuntimeError, match="inside"), \
                lnviz.patch(model, {"layers.0.norm1": lambda t: t * 0}):
            raise RuntimeError("inside the block")
        assert torch.equal(model(x), plain)
    unknown = r"no module named 'layers\.9\.norm1'.*layers\.0\.norm1"
    with pytest.raises(KeyError, match=unknown), lnviz.patch(model, {"layers.9.norm1": id}):
        pass
    with pytest.raises(TypeError, match="callable"), lnviz.patch(model, {"layers.0.norm1": 3}):
        pass
    assert all("forward" not in mod.__dict__ for mod in model.modules())


def test_patch_and_capture_on_transformers_own_bert() -> None:
    """On transformers' BertModel: a LayerNorm patched to itself (lnviz's LayerNorm of its
    input, computed outside the model) gives the plain output; patched to the identity, the
    recorded input of the next LayerNorm changes; capture inside the block records fn's output."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=20)
    torch.manual_seed(0)
    bert = transformers.BertModel(config).eval()
    ids = torch.tensor([[1, 5, 7, 2]])
    name = "encoder.layer.0.attention.output.LayerNorm"
    norm = dict(bert.named_modules())[name]
    with torch.no_grad():
        plain = bert(ids).last_hidden_state
        same = lnn.LayerNorm(16, eps=norm.eps)
        same.load_state_dict(norm.state_dict())
        with lnviz.patch(bert, {name: same}):
            again = bert(ids).last_hidden_state
        with lnviz.patch(bert, {name: lambda t: t}):
            cap = lnviz.capture(bert, ids)
    assert (again - plain).abs().max() < 1e-5
    record = next(r for r in cap.records if r.name == name)
    assert torch.equal(record.output, record.input)  # the identity's output, recorded
    assert (bert(ids).last_hidden_state - plain).abs().max() == 0


def test_capture_records_lnviz_modules_as_torchs() -> None:
    model = nn.Sequential(nn.Linear(4, 6), lnn.LayerNorm(6), nn.Linear(6, 6), lnn.RMSNorm(6),
                          nn.Unflatten(1, (6, 1)), lnn.BatchNorm1d(6)).eval()
    cap = lnviz.capture(model, torch.randn(5, 4))
    assert [(r.name, r.kind) for r in cap.records] == [
        ("1", "LayerNorm"), ("3", "RMSNorm"), ("5", "BatchNorm")]
    for record in cap.records:
        assert (record.replay().output - record.output).abs().max() < 1e-5


def test_a_patch_holds_for_its_own_thread_alone_and_nests() -> None:
    """Two learners' sessions share one model: while one thread is inside a patch block,
    another thread's forward is the model's own; a patch inside a patch of the same module
    wins until its block ends; the last block to end gives the module its forward back."""
    import threading

    model = _encoder()
    x = torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(5))
    name = "layers.0.norm1"
    with torch.no_grad():
        plain = model(x)
    inside, done = threading.Event(), threading.Event()
    seen: dict[str, torch.Tensor] = {}

    def patched_session() -> None:
        with torch.no_grad(), lnviz.patch(model, {name: torch.zeros_like}):
            seen["patched"] = model(x)
            inside.set()
            done.wait(timeout=60)
            seen["still patched"] = model(x)

    other = threading.Thread(target=patched_session)
    other.start()
    assert inside.wait(timeout=60)
    with torch.no_grad():
        seen["other session"] = model(x)  # while the first is inside its block
        with lnviz.patch(model, {name: lambda t: t}):  # a block of this thread's own
            seen["own"] = model(x)
            with lnviz.patch(model, {name: torch.zeros_like}):
                seen["nested"] = model(x)
            seen["own again"] = model(x)
    done.set()
    other.join(timeout=60)
    # the model's own output (up to the rounding of torch's fast path, which the other
    # thread's block turned off process-wide)
    assert (seen["other session"] - plain).abs().max() < 1e-5
    assert torch.equal(seen["patched"], seen["still patched"])
    assert (seen["patched"] - plain).abs().max() > 0.1
    assert torch.equal(seen["nested"], seen["patched"])
    assert torch.equal(seen["own"], seen["own again"])
    assert (seen["own"] - plain).abs().max() > 0.01  # the identity in LayerNorm's place
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_a_replacement_must_keep_the_shape() -> None:
    model = _encoder()
    wrong = r"layers\.0\.norm1 gave shape \(3,\)"
    with torch.no_grad(), pytest.raises(ValueError, match=wrong), \
            lnviz.patch(model, {"layers.0.norm1": lambda t: t.flatten()[:3]}):
        model(torch.randn(1, 3, 8))
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_a_capture_records_its_own_thread_alone_and_leaves_the_fast_path_as_it_was() -> None:
    """Two learners' runs on one shared model: a capture records only the calls of its own
    thread, however many forwards other threads make meanwhile; the transformer fast path stays
    off until the last block of any thread ends, then is what it was."""
    import threading

    model = nn.Sequential(nn.Linear(4, 4), lnn.LayerNorm(4), nn.Linear(4, 4), lnn.RMSNorm(4))
    x = torch.randn(3, 4)
    before = torch.backends.mha.get_fastpath_enabled()
    stop = threading.Event()

    def other_learner() -> None:
        while not stop.is_set():
            model(torch.randn(5, 4))  # another shape: its calls would show if recorded

    other = threading.Thread(target=other_learner)
    other.start()
    try:
        for _ in range(20):
            cap = lnviz.capture(model, x)
            assert [(r.name, r.call, tuple(r.input.shape)) for r in cap.records] == [
                ("1", 0, (3, 4)), ("3", 0, (3, 4))]
    finally:
        stop.set()
        other.join(timeout=60)
    entered, leave = threading.Event(), threading.Event()

    def long_block() -> None:
        with lnviz.patch(model, {"1": lambda t: t}):
            entered.set()
            leave.wait(timeout=60)

    first = threading.Thread(target=long_block)
    first.start()
    assert entered.wait(timeout=60)
    with lnviz.patch(model, {"3": lambda t: t}):
        assert not torch.backends.mha.get_fastpath_enabled()
    assert not torch.backends.mha.get_fastpath_enabled()  # the other block is still under way
    leave.set()
    first.join(timeout=60)
    assert torch.backends.mha.get_fastpath_enabled() == before


def test_a_patched_module_takes_its_input_by_keyword_and_its_copies_compute_themselves() -> None:
    """transformers calls some norms as norm(hidden_states=x): the dispatcher passes keywords
    on; a deep copy of a model taken inside a patch block computes with its own weights."""
    class KeywordNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.full((4,), 2.0))

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            return hidden_states * self.weight

    model = nn.Sequential(KeywordNorm())
    x = torch.ones(2, 4)
    with lnviz.patch(model, {"0": lambda t: t + 1}):
        assert torch.equal(model[0](hidden_states=x), x + 1)
        copy_ = copy.deepcopy(model)
    with torch.no_grad():
        copy_[0].weight.fill_(3.0)
    assert torch.equal(copy_(x), 3 * x) and torch.equal(model(x), 2 * x)
    assert "forward" not in model[0].__dict__


def _torch_block(x: torch.Tensor, w: dict[str, torch.Tensor], placement: str) -> torch.Tensor:
    """The block written with torch alone: scaled_dot_product_attention for the one head,
    torch.nn.functional's layer_norm and gelu."""
    import torch.nn.functional as F

    def ln(h: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(h, h.shape[-1:], w[name + "_weight"], w[name + "_bias"])

    def attn(h: torch.Tensor) -> torch.Tensor:
        q, k, v = F.linear(h, w["wq"]), F.linear(h, w["wk"]), F.linear(h, w["wv"])
        return F.linear(F.scaled_dot_product_attention(q, k, v), w["wo"])

    def ffn(h: torch.Tensor) -> torch.Tensor:
        return F.linear(F.gelu(F.linear(h, w["w1"], w["b1"])), w["w2"], w["b2"])

    if placement == "post-LN":
        h = ln(x + attn(x), "ln1")
        return ln(h + ffn(h), "ln2")
    if placement == "pre-LN":
        h = x + attn(ln(x, "ln1"))
        return h + ffn(ln(h, "ln2"))
    if placement == "Peri-LN":
        h = x + ln(attn(ln(x, "ln1")), "ln1o")
        return h + ln(ffn(ln(h, "ln2")), "ln2o")
    if placement == "OLMo-2":
        h = x + ln(attn(x), "ln1o")
        return h + ln(ffn(h), "ln2o")
    h = x + attn(x)
    return h + ffn(h)


@pytest.mark.parametrize("placement", lnn.PLACEMENTS)
def test_the_transformer_block_is_the_placement_written_with_torch(placement: str) -> None:
    """lnviz.nn.TransformerBlock in each placement against the same block written with
    torch's attention, LayerNorm and GELU, on trained-looking (non-initial) γ and β; its
    parameters are the norms the placement has, named as lnviz.nn.block reads them."""
    block = lnn.TransformerBlock(16, placement, gain=1.0,
                                 generator=torch.Generator().manual_seed(3),
                                 dtype=torch.float64)
    names = {n.split(".", 1)[1] for n, _ in block.named_parameters()}
    norms = {f"{n}_{p}" for n in lnn.block_norms(placement) for p in ("weight", "bias")}
    assert names == {"wq", "wk", "wv", "wo", "w1", "b1", "w2", "b2"} | norms
    draw = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for name, p in block.weights.items():
            if name.startswith("ln"):
                p.copy_(torch.randn(p.shape, generator=draw, dtype=p.dtype) * 0.5
                        + (1.0 if name.endswith("weight") else 0.0))
    x = torch.randn(2, 5, 16, generator=draw, dtype=torch.float64)
    expected = _torch_block(x, dict(block.weights.items()), placement)
    torch.testing.assert_close(block(x), expected, rtol=1e-10, atol=1e-10)
    stream, attn, ffn = block.parts(x)
    assert torch.equal(stream, block(x)) and attn.shape == ffn.shape == x.shape


@pytest.mark.parametrize(("norm", "extra"), [("RMSNorm", set()), ("DyT", {"alpha"})])
def test_the_block_norms_of_rmsnorm_and_dyt(norm: str, extra: set[str]) -> None:
    block = lnn.TransformerBlock(8, "pre-LN", norm)
    names = {n.split(".", 1)[1] for n, _ in block.named_parameters()}
    wanted = {"weight", "bias"} - ({"bias"} if norm == "RMSNorm" else set()) | extra
    assert {n for n in names if n.startswith("ln")} == {f"ln{i}_{p}" for i in (1, 2)
                                                        for p in wanted}
    assert block(torch.randn(1, 3, 8)).shape == (1, 3, 8)
    with pytest.raises(ValueError, match="placement must be one of"):
        lnn.TransformerBlock(8, "middle-LN")
