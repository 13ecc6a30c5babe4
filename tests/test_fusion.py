"""Export-time fusion (docs/format.md, "Fused operators"): batch norms folded into conv2d/linear,
residual adds and activations fused into kiln::fused_conv2d / kiln::fused_linear.

Each model is exported twice: fused (the default), where the program must contain the fused
operators and no batch norm, and with optimize=False, where it keeps the model's operators. Both
must match eager PyTorch (within 1e-4 of the output's scale). Batch norm statistics are far from the
identity (small running variances, so eps matters too): a wrong fold shows in the results.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln

from conftest import assert_close

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

TOLERANCE = 1e-4  # against eager PyTorch, relative to the output's scale
BN = "aten::_native_batch_norm_legit_no_training.default"
FUSED_LINEAR = "kiln::fused_linear.default"
FUSED_CONV = "kiln::fused_conv2d.default"


def _randomize_bn(bn: nn.modules.batchnorm._BatchNorm, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bn.running_mean.copy_(torch.rand(bn.num_features, generator=g) * 2 - 1)
        bn.running_var.copy_(torch.rand(bn.num_features, generator=g) * 0.2 + 0.01)
        if bn.affine:
            bn.weight.copy_(torch.rand(bn.num_features, generator=g) + 0.5)
            bn.bias.copy_(torch.rand(bn.num_features, generator=g) - 0.5)
    return bn


def bn2d(c, seed, **kw):
    return _randomize_bn(nn.BatchNorm2d(c, **kw), seed)


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), bn2d(8, 1)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class ResNetBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + x); bn2 without affine parameters, another eps."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), bn2d(c, 2)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1), bn2d(c, 3, affine=False, eps=1e-3)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class DepthwiseBnRelu6(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=8), bn2d(16, 4)

    def forward(self, x):
        return F.relu6(self.bn(self.conv(x)))


class ConvBnHardswish(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(8, 8, 1), bn2d(8, 5)

    def forward(self, x):
        return F.hardswish(self.bn(self.conv(x)))


class LinearAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc, self.act = nn.Linear(16, 32), act

    def forward(self, x):
        return self.act(self.fc(x))


class LinearResidual(nn.Module):
    """A transformer's residual: x + proj(h), twice (once with the operands swapped)."""

    def __init__(self):
        super().__init__()
        self.proj, self.out = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        x = x + self.proj(torch.tanh(x))
        return self.out(x * 0.5) + x


class LinearBn1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn = nn.Linear(16, 12), _randomize_bn(nn.BatchNorm1d(12), 6)

    def forward(self, x):
        return torch.sigmoid(self.bn(self.fc(x)))


class SiluMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 8))

    def forward(self, x):
        return self.net(x)


class Clamps(nn.Module):
    """clamp with one and with two constant bounds, hardtanh, tanh, hardsigmoid, gelu tanh."""

    def __init__(self):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(16, 16) for _ in range(6))

    def forward(self, x):
        a, b, c, d, e, f = (fc(x) for fc in self.fcs)
        return (torch.clamp(a, max=0.25), torch.clamp(b, -0.5, 0.5), F.hardtanh(c, -0.3, 0.2), torch.tanh(d),
                F.hardsigmoid(e), F.gelu(f, approximate="tanh"))


def x_image(c=3, n=2, hw=12):
    return torch.randn(n, c, hw, hw, generator=torch.Generator().manual_seed(10)) * 2


def x_tokens(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(11)) * 2


# name -> (model, inputs, export kwargs, {fused operator: calls}, report's fused counts)
CASES = {
    "conv_bn_relu": (ConvBnRelu, (x_image(),), {}, {FUSED_CONV: 1},
                     {("batch_norm", "conv2d"): 1, ("relu", "conv2d"): 1}),
    "resnet_block": (ResNetBlock, (x_image(8),), {}, {FUSED_CONV: 2},
                     {("batch_norm", "conv2d"): 2, ("relu", "conv2d"): 2, ("residual_add", "conv2d"): 1}),
    "depthwise_bn_relu6": (DepthwiseBnRelu6, (x_image(8),), {}, {FUSED_CONV: 1},
                           {("batch_norm", "conv2d"): 1, ("relu6", "conv2d"): 1}),
    "conv_bn_hardswish": (ConvBnHardswish, (x_image(8),), {}, {FUSED_CONV: 1},
                          {("batch_norm", "conv2d"): 1, ("hardswish", "conv2d"): 1}),
    "linear_gelu": (lambda: LinearAct(nn.GELU()), (x_tokens(2, 5, 16),), {}, {FUSED_LINEAR: 1},
                    {("gelu", "linear"): 1}),
    "linear_residual": (LinearResidual, (x_tokens(2, 5, 16),), {}, {FUSED_LINEAR: 2},
                        {("residual_add", "linear"): 2}),
    "linear_bn1d": (LinearBn1d, (x_tokens(6, 16),), {}, {FUSED_LINEAR: 1},
                    {("batch_norm", "linear"): 1, ("sigmoid", "linear"): 1}),
    "silu_mlp": (SiluMlp, (x_tokens(4, 16),), {}, {FUSED_LINEAR: 2, "aten::linear.default": 1},
                 {("silu", "linear"): 2}),
    "clamps": (Clamps, (x_tokens(3, 16),), {}, {FUSED_LINEAR: 6},
               {("clamp", "linear"): 2, ("hardtanh", "linear"): 1, ("tanh", "linear"): 1,
                ("hardsigmoid", "linear"): 1, ("gelu_tanh", "linear"): 1}),
    # dynamic sizes: the residual's shape equals the output's only symbolically
    "resnet_block_dynamic_batch": (ResNetBlock, (x_image(8, n=3),),
                                   {"dynamic_shapes": ({0: torch.export.Dim("batch", max=8)},)}, {FUSED_CONV: 2},
                                   {("batch_norm", "conv2d"): 2, ("relu", "conv2d"): 2,
                                    ("residual_add", "conv2d"): 1}),
    "linear_residual_dynamic_tokens": (LinearResidual, (x_tokens(2, 5, 16),),
                                       {"dynamic_shapes": ({1: torch.export.Dim("tokens", max=32)},)},
                                       {FUSED_LINEAR: 2}, {("residual_add", "linear"): 2}),
}


def kernel_calls(path) -> Counter:
    """{operator: number of instructions calling it} of the program's forward."""
    return Counter(i.op for i in kiln.load(path).method("forward").instructions if i.kind == "kernel")


def assert_matches_eager(path, model, inputs):
    with torch.no_grad():
        want = model(*inputs)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for kernels in ("optimized", "portable"):
        got = kiln.load(path, kernels=kernels).forward(*[t.numpy() for t in inputs])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w.numpy(), TOLERANCE, what=kernels)


def export_case(name, tmp_path, **extra):
    from kiln.export import export

    build, inputs, kwargs, _, _ = CASES[name]
    torch.manual_seed(0)
    model = build().eval()
    path = tmp_path / f"{name}.kiln"
    report = export(model, inputs, path, **kwargs, **extra)
    return model, inputs, path, report


@pytest.mark.parametrize("name", list(CASES))
def test_fused_program_matches_eager(name, tmp_path):
    model, inputs, path, report = export_case(name, tmp_path)
    _, _, _, fused_ops, fused = CASES[name]
    calls = kernel_calls(path)
    for op, n in fused_ops.items():
        assert calls[op] == n, calls
    assert BN not in calls
    assert report.methods["forward"].fused == fused
    assert_matches_eager(path, model, inputs)


@pytest.mark.parametrize("name", list(CASES))
def test_optimize_false_keeps_the_models_operators(name, tmp_path):
    model, inputs, path, report = export_case(name, tmp_path, optimize=False)
    calls = kernel_calls(path)
    assert not [op for op in calls if op.startswith("kiln::")], calls
    folded = sum(n for (what, _), n in CASES[name][4].items() if what == "batch_norm")
    assert calls[BN] == folded
    assert report.methods["forward"].fused == {}
    assert "fused: nothing (optimize=False)" in str(report)
    assert_matches_eager(path, model, inputs)


@pytest.mark.parametrize("batch", [1, 2, 5, 8])
def test_dynamic_batch_runs_at_every_size(batch, tmp_path):
    model, _, path, _ = export_case("resnet_block_dynamic_batch", tmp_path)
    assert_matches_eager(path, model, (x_image(8, n=batch),))


def test_report_says_what_was_fused(tmp_path):
    _, _, _, report = export_case("resnet_block", tmp_path)
    assert report.methods["forward"].fused_summary() == (
        "2 batch norms folded into conv2d; 1 residual add and 2 relu into conv2d")
    assert "    fused: 2 batch norms folded into conv2d; 1 residual add and 2 relu into conv2d" in str(report)


def test_reference_cnn_is_fused(exported):
    _, _, _, report = exported("cnn")
    assert report.methods["forward"].fused == {
        ("batch_norm", "conv2d"): 3, ("relu", "conv2d"): 3, ("residual_add", "conv2d"): 1, ("relu6", "conv2d"): 1}


# -- what must not be fused -------------------------------------------------------------

class Fn(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, m in modules.items():
            setattr(self, name, m)

    def forward(self, *args):
        return self.fn(self, *args)


NOT_FUSED = {
    # the conv output feeds the activation and is an output itself
    "conv_output_used_twice": (
        lambda: Fn(lambda m, x: (lambda y: (F.relu(y), y * 0.5))(m.conv(x)), conv=nn.Conv2d(3, 4, 3)), (x_image(),),
        {"aten::conv2d.default": 1, "aten::relu.default": 1}),
    # the batch norm's input is also used elsewhere: not folded, and then nothing follows the conv
    "bn_input_used_twice": (
        lambda: Fn(lambda m, x: (lambda y: F.relu(m.bn(y)) + y)(m.conv(x)), conv=nn.Conv2d(3, 4, 3), bn=bn2d(4, 7)),
        (x_image(),), {"aten::conv2d.default": 1, BN: 1}),
    # the linear output feeds the activation and a second consumer
    "linear_output_used_twice": (
        lambda: Fn(lambda m, x: (lambda y: F.gelu(y) * y)(m.fc(x)), fc=nn.Linear(16, 16)), (x_tokens(3, 16),),
        {"aten::linear.default": 1, "aten::gelu.default": 1}),
    # the add broadcasts [16] against [3, 16]
    "residual_broadcasts": (
        lambda: Fn(lambda m, x, r: F.relu(m.fc(x) + r), fc=nn.Linear(16, 16)), (x_tokens(3, 16), x_tokens(16)),
        {FUSED_LINEAR: 0, "aten::linear.default": 1, "aten::add.Tensor": 1, "aten::relu.default": 1}),
    # the add after the activation stays: residual + act(linear(x))
    "add_after_activation": (
        lambda: Fn(lambda m, x: x + F.relu(m.fc(x)), fc=nn.Linear(16, 16)), (x_tokens(3, 16),),
        {FUSED_LINEAR: 1, "aten::add.Tensor": 1}),
    # alpha != 1
    "add_with_alpha": (
        lambda: Fn(lambda m, x: torch.add(x, m.fc(x), alpha=2.0), fc=nn.Linear(16, 16)), (x_tokens(3, 16),),
        {"aten::linear.default": 1, "aten::add.Tensor": 1}),
    # BatchNorm1d over dim 1 of a [N, C, L] linear output: not the linear's output features
    "bn1d_over_another_dim": (
        lambda: Fn(lambda m, x: m.bn(m.fc(x)), fc=nn.Linear(16, 6), bn=_randomize_bn(nn.BatchNorm1d(5), 8)),
        (x_tokens(2, 5, 16),), {"aten::linear.default": 1, BN: 1}),
}


@pytest.mark.parametrize("name", list(NOT_FUSED))
def test_patterns_that_must_not_fuse(name, tmp_path):
    from kiln.export import export

    build, inputs, expected = NOT_FUSED[name]
    torch.manual_seed(0)
    model = build().eval()
    path = tmp_path / f"{name}.kiln"
    export(model, inputs, path)
    calls = kernel_calls(path)
    for op, n in expected.items():
        assert calls[op] == n, calls
    assert_matches_eager(path, model, inputs)


def test_float64_is_not_fused(tmp_path):
    """The fused kernels are float32 only: a float64 linear + relu stays as it is."""
    from kiln.export import export

    model = LinearAct(nn.ReLU()).double().eval()
    report = export(model, (x_tokens(3, 16).double(),), tmp_path / "f64.kiln")
    assert report.methods["forward"].operators == ["aten::linear.default", "aten::relu.default"]
    assert report.methods["forward"].fused == {}


# -- bad programs: the kernels validate what the file says ------------------------------

def fused_program(path, op: str, *, activation="relu", residual_shape=None):
    """forward(x, w, residual) = op(x, w, None, residual, ...): x [1, 2, 5, 5], w [3, 2, 3, 3] for
    fused_conv2d (output [1, 3, 3, 3]), x [2, 4], w [3, 4] for fused_linear (output [2, 3])."""
    from kiln.export.lowering.ir import (
        BOUND,
        FLOAT32,
        PLANNED,
        Instruction,
        MethodIR,
        ProgramIR,
        ScalarValue,
        TensorValue,
    )
    from kiln.export.lowering.serialize import write_program

    conv = op == "kiln::fused_conv2d"
    x, w, y = ([1, 2, 5, 5], [3, 2, 3, 3], [1, 3, 3, 3]) if conv else ([2, 4], [3, 4], [2, 3])
    residual_shape = y if residual_shape is None else residual_shape
    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, x, BOUND), TensorValue(FLOAT32, w, BOUND),
                TensorValue(FLOAT32, residual_shape, BOUND), ScalarValue("None"),
                ScalarValue("String", activation), ScalarValue("Double", 0.0), ScalarValue("Double", 0.0),
                TensorValue(FLOAT32, y, PLANNED, arena=0, arena_offset=0)]
    window = []
    if conv:
        m.values += [ScalarValue("IntList", (1, 1)), ScalarValue("IntList", (0, 0)), ScalarValue("Int", 1)]
        window = [8, 9, 8, 10]  # stride, padding, dilation, groups
    m.operators = [(op, "default")]
    m.instructions = [Instruction(0, [0, 1, 3, 2, *window, 4, 5, 6], [7])]
    m.inputs, m.outputs = [0, 1, 2], [7]
    m.input_names, m.output_names = ["x", "w", "residual"], ["y"]
    m.arena_sizes = [4 * int(np.prod(y))]
    write_program(ProgramIR([m], [], producer="tests"), path)
    return [np.ones(s, dtype=np.float32) for s in (x, w, residual_shape)]


@pytest.mark.parametrize("op", ["kiln::fused_linear", "kiln::fused_conv2d"])
def test_hand_built_program_runs(op, tmp_path):
    """The builder below is right: with good arguments the kernels compute relu(x @ w + 1)."""
    inputs = fused_program(tmp_path / "ok.kiln", op)
    (y,) = kiln.load(tmp_path / "ok.kiln").forward(*inputs)
    k = 4 if op == "kiln::fused_linear" else 2 * 9
    np.testing.assert_array_equal(y, np.full(y.shape, k + 1, dtype=np.float32))


@pytest.mark.parametrize("op", ["kiln::fused_linear", "kiln::fused_conv2d"])
def test_unknown_activation_is_a_clear_error(op, tmp_path):
    inputs = fused_program(tmp_path / "bad.kiln", op, activation="swish")
    with pytest.raises(kiln.KilnError, match=f'{op}.default: unknown activation "swish"'):
        kiln.load(tmp_path / "bad.kiln").forward(*inputs)


@pytest.mark.parametrize("op", ["kiln::fused_linear", "kiln::fused_conv2d"])
def test_residual_of_another_shape_is_a_clear_error(op, tmp_path):
    shape = [2, 1] if op == "kiln::fused_linear" else [1, 3, 1, 3]  # would broadcast: still refused
    inputs = fused_program(tmp_path / "bad.kiln", op, residual_shape=shape)
    with pytest.raises(kiln.KilnError, match="residual must have the output's shape"):
        kiln.load(tmp_path / "bad.kiln").forward(*inputs)
