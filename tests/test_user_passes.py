"""Users' own graph passes: export(..., passes=[fn]) and compare(..., passes=[fn]).

A pass is fn(ctx: kiln.export.PassContext) rewriting ctx.graph in place. It runs after
kiln's canonicalization and before kiln's fusions, casts, folding and dead-code elimination,
so what it leaves is fused and cleaned up like the model's own operators.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln
import kiln.export
from kiln.errors import ExportError

from conftest import assert_close

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

aten = torch.ops.aten


class SigmoidGate(nn.Module):
    """x * sigmoid(x) written out by hand: SiLU, which kiln has one kernel for."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        return h * torch.sigmoid(h)


def fuse_silu(ctx: kiln.export.PassContext) -> None:
    """Rewrites mul(h, sigmoid(h)) into silu(h)."""
    for node in list(ctx.graph.nodes):
        if node.op != "call_function" or node.target is not aten.mul.Tensor:
            continue
        a, b = node.args
        for x, gate in ((a, b), (b, a)):
            if (getattr(gate, "target", None) is aten.sigmoid.default and gate.args[0] is x
                    and len(gate.users) == 1):
                silu = ctx.call(aten.silu.default, (x,), like=node)
                ctx.replace(node, silu)
                break


def _operators(path):
    method = kiln.load(path).method("forward")
    return [i.op for i in method.instructions if i.kind == "kernel"]


def test_a_user_pass_rewrites_the_graph_and_kiln_fuses_what_it_leaves(tmp_path):
    model = SigmoidGate().eval()
    x = torch.randn(3, 16)
    plain, rewritten = tmp_path / "plain.kiln", tmp_path / "rewritten.kiln"
    kiln.export.export(model, (x,), plain)
    report = kiln.export.export(model, (x,), rewritten, passes=[fuse_silu])

    assert "aten::sigmoid.default" in _operators(plain)
    ops = _operators(rewritten)
    # The pass made silu; kiln's epilogue fusion then folded it into the linear.
    assert "aten::sigmoid.default" not in ops and "aten::mul.Tensor" not in ops, ops
    assert ops == ["kiln::fused_linear.default"], ops
    assert report.methods["forward"].fused.get(("silu", "linear")) == 1, report.methods["forward"].fused
    expected = model(x).detach().numpy()
    assert_close(kiln.load(rewritten).forward(x.numpy())[0], expected, 1e-4)


def test_user_passes_run_in_the_given_order(tmp_path):
    seen = []

    def first(ctx):
        seen.append(("first", ctx.method))

    def second(ctx):
        seen.append(("second", ctx.method))

    kiln.export.export(SigmoidGate().eval(), (torch.randn(2, 16),), tmp_path / "m.kiln",
                       passes=[first, second])
    assert seen == [("first", "forward"), ("second", "forward")]


def test_a_failing_user_pass_is_named_and_nothing_is_written(tmp_path):
    def broken_rewrite(ctx):
        raise KeyError("no such node")

    path = tmp_path / "m.kiln"
    with pytest.raises(ExportError, match=r"user pass .*broken_rewrite.*KeyError"):
        kiln.export.export(SigmoidGate().eval(), (torch.randn(2, 16),), path, passes=[broken_rewrite])
    assert not path.exists()


def test_a_pass_that_is_not_callable_is_refused(tmp_path):
    with pytest.raises(ExportError, match="passes must be callables"):
        kiln.export.export(SigmoidGate().eval(), (torch.randn(2, 16),), tmp_path / "m.kiln",
                           passes=["fuse_silu"])


def test_compare_runs_the_same_user_passes():
    model = SigmoidGate().eval()
    result = kiln.export.compare(model, (torch.randn(3, 16),), passes=[fuse_silu])
    assert result.first_divergence is None, result
    # The output (eager: the mul) is computed by the linear the silu was fused into.
    assert result.values[-1].eager_op == "aten::mul.Tensor", result
    assert result.values[-1].op == "kiln::fused_linear.default", result
    assert result.outputs and max(result.outputs) <= 1e-4
