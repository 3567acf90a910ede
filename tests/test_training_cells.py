"""The LSTM cells of lnviz.lessons.training against torch and the LN-LSTM equations written out."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lnviz.lessons.training import (
    LN_LSTM_CELL_CODE,
    MODELS,
    BatchNormLSTMCell,
    LayerNormLSTMCell,
    LSTMCell,
    batch_sensitivity,
    gate_quantiles,
    make_model,
)

N, T, I, H, C = 5, 4, 3, 6, 7  # noqa: E741  (I: input size, as in the equations)


def randomize(module: torch.nn.Module, seed: int = 0) -> None:
    """Give every parameter (γ and β included) random values, so that no term is trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.7)


@pytest.mark.parametrize("kind", MODELS)
def test_classifier_shapes_and_finite_gradients(kind: str, device: str) -> None:
    torch.manual_seed(0)
    model = make_model(kind, I, H, C, max_steps=T).to(device)
    x = torch.rand(N, T, I, device=device)
    logits, gates = model.forward_with_gates(x)
    assert logits.shape == (N, C) and gates.shape == (T, N, 4 * H)
    torch.testing.assert_close(model(x), logits)
    F.cross_entropy(logits, torch.arange(N, device=device) % C).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_plain_cell_matches_torch_lstm_cell() -> None:
    torch.manual_seed(1)
    cell, ref = LSTMCell(I, H), torch.nn.LSTMCell(I, H)
    randomize(cell)
    with torch.no_grad():
        ref.weight_ih.copy_(cell.weight_ih)
        ref.weight_hh.copy_(cell.weight_hh)
        ref.bias_ih.copy_(cell.bias)
        ref.bias_hh.zero_()  # torch's two biases only ever appear as their sum
    x, h, c = torch.randn(N, I), torch.randn(N, H), torch.randn(N, H)
    h1, c1, _ = cell(x, (h, c))
    h_ref, c_ref = ref(x, (h, c))
    torch.testing.assert_close(h1, h_ref)
    torch.testing.assert_close(c1, c_ref)


def ln_lstm_reference(cell: LayerNormLSTMCell, x, h, c):
    """The LN-LSTM equations of Ba et al. (2016), with torch's own layer_norm."""
    z = (F.layer_norm(x @ cell.weight_ih.T, (4 * H,), cell.gamma_ih, cell.beta_ih)
         + F.layer_norm(h @ cell.weight_hh.T, (4 * H,), cell.gamma_hh, cell.beta_hh))
    if cell.bias is not None:
        z = z + cell.bias
    i, f, g, o = z.split(H, dim=1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_new = torch.sigmoid(o) * torch.tanh(F.layer_norm(c_new, (H,), cell.gamma_c, cell.beta_c))
    return h_new, c_new, z


@pytest.mark.parametrize("single_bias", [False, True])
def test_ln_lstm_cell_matches_the_equations(single_bias: bool) -> None:
    cell = LayerNormLSTMCell(I, H, single_bias=single_bias)
    randomize(cell, seed=2)
    x, h, c = torch.randn(N, I), torch.randn(N, H) * 3, torch.randn(N, H) * 5
    for got, want in zip(cell(x, (h, c)), ln_lstm_reference(cell, x, h, c), strict=True):
        torch.testing.assert_close(got, want)


def test_classifier_runs_the_cell_step_by_step() -> None:
    torch.manual_seed(3)
    model = make_model("ln-lstm", I, H, C)
    randomize(model, seed=3)
    x = torch.randn(N, T, I)
    h = c = torch.zeros(N, H)
    zs = []
    for t in range(T):
        h, c, z = ln_lstm_reference(model.cell, x[:, t], h, c)
        zs.append(z)
    logits, gates = model.forward_with_gates(x)
    torch.testing.assert_close(logits, model.head(h))
    torch.testing.assert_close(gates, torch.stack(zs))


def test_the_pytorch_snippet_computes_what_the_cell_computes() -> None:
    namespace: dict = {}
    exec(LN_LSTM_CELL_CODE, namespace)
    snippet = namespace["LayerNormLSTMCell"](I, H)
    cell = LayerNormLSTMCell(I, H)
    randomize(cell, seed=4)
    with torch.no_grad():
        snippet.w_x.weight.copy_(cell.weight_ih)
        snippet.w_h.weight.copy_(cell.weight_hh)
        for which in ("x", "h", "c"):
            name = {"x": "ih", "h": "hh", "c": "c"}[which]
            getattr(snippet, f"ln_{which}").weight.copy_(getattr(cell, f"gamma_{name}"))
            getattr(snippet, f"ln_{which}").bias.copy_(getattr(cell, f"beta_{name}"))
    x, h, c = torch.randn(N, I), torch.randn(N, H), torch.randn(N, H)
    h1, c1, _ = cell(x, (h, c))
    h2, c2 = snippet(x, (h, c))
    torch.testing.assert_close(h1, h2)
    torch.testing.assert_close(c1, c2)


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_single_bias_saves_4h_parameters_and_is_the_same_model() -> None:
    two, one = LayerNormLSTMCell(I, H), LayerNormLSTMCell(I, H, single_bias=True)
    weights = 4 * H * I + 4 * H * H
    assert count(two) == weights + 2 * (4 * H) * 2 + 2 * H  # γ, β for W x and U h; γ_c, β_c
    assert count(one) == count(two) - 4 * H
    assert one.beta_ih is None and one.beta_hh is None and one.bias is not None
    # β_x and β_h act only through their sum: one bias b = β_x + β_h gives the same numbers.
    randomize(two, seed=5)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "gamma_ih", "gamma_hh", "gamma_c", "beta_c"):
            getattr(one, name).copy_(getattr(two, name))
        one.bias.copy_(two.beta_ih + two.beta_hh)
    x, h, c = torch.randn(N, I), torch.randn(N, H), torch.randn(N, H)
    for a, b in zip(one(x, (h, c)), two(x, (h, c)), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("cls", [LayerNormLSTMCell, BatchNormLSTMCell])
def test_gamma_and_beta_start_where_asked(cls: type) -> None:
    cell = cls(I, H, gamma_init=0.3, beta_init=-0.5)
    for which in ("ih", "hh", "c"):
        assert torch.all(getattr(cell, f"gamma_{which}") == 0.3)
        assert torch.all(getattr(cell, f"beta_{which}") == -0.5)
    shared = cls(I, H, gamma_init=0.3, beta_init=-0.5, single_bias=True)
    assert torch.all(shared.bias == -1.0)  # b = β_x + β_h at the start


def test_bn_lstm_cell_matches_batch_norm_per_step() -> None:
    torch.manual_seed(6)
    cell = BatchNormLSTMCell(I, H, max_steps=2)
    randomize(cell, seed=6)
    x, h, c = torch.randn(N, I), torch.randn(N, H), torch.randn(N, H)
    _, _, z = cell(x, (h, c), step=1)

    def bn(values, gamma, beta):
        return F.batch_norm(values, None, None, gamma, beta, training=True)

    z_ref = (bn(x @ cell.weight_ih.T, cell.gamma_ih, cell.beta_ih)
             + bn(h @ cell.weight_hh.T, cell.gamma_hh, cell.beta_hh))
    torch.testing.assert_close(z, z_ref)
    # Only step 1's running statistics moved; step 0's are still at their start.
    assert torch.all(cell.running_mean_ih[0] == 0) and torch.all(cell.running_var_ih[0] == 1)
    mean = (x @ cell.weight_ih.T).mean(0).detach()
    torch.testing.assert_close(cell.running_mean_ih[1], 0.1 * mean)
    # In evaluation mode the running statistics are used: each sample is on its own.
    cell.eval()
    _, _, z_eval = cell(x, (h, c), step=1)
    _, _, z_one = cell(x[:1], (h[:1], c[:1]), step=1)
    torch.testing.assert_close(z_eval[:1], z_one)


def test_batch_norm_depends_on_the_batch_and_layer_norm_does_not() -> None:
    torch.manual_seed(7)
    x = torch.rand(64, T, I)
    ln, bn = make_model("ln-lstm", I, H, C), make_model("bn-lstm", I, H, C, max_steps=T)
    randomize(ln, seed=7)
    before = bn.cell.running_mean_ih.clone()
    assert batch_sensitivity(ln, x, 1) < 1e-5
    assert batch_sensitivity(ln, x, 1, training=True) < 1e-5
    assert batch_sensitivity(bn, x, 2, training=True) > 1e-2
    assert batch_sensitivity(bn, x, 1) < 1e-5  # running averages: no batch in sight
    torch.testing.assert_close(bn.cell.running_mean_ih, before)  # a copy ran in training mode
    assert bn.training


def test_gate_quantiles_shape_and_order() -> None:
    torch.manual_seed(8)
    model = make_model("ln-lstm", I, H, C)
    q = gate_quantiles(model, torch.rand(32, T, I))
    assert q.shape == (5, T, 5)
    assert (q[..., 1:] >= q[..., :-1]).all()
    # At t = 0, h = 0 so U h = 0 and LN(0) = β = 0: z is LN(W x) alone, mean 0 per sample.
    assert abs(q[4, 0, 2]) < 0.5 and q[4, 0, 0] < -1 < 1 < q[4, 0, 4]


def test_make_model_refuses_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="gru"):
        make_model("gru", I, H, C)
