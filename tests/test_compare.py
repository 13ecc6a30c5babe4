"""kiln.export.compare: eager PyTorch and kiln side by side, value by value,
naming the operator where they start to differ."""

import subprocess
import sys
import textwrap

import pytest

from conftest import clean_env


@pytest.mark.parametrize("name", ["encoder", "cnn", "dynamic_state"])
def test_a_faithful_program_agrees_everywhere(torch, name):
    from kiln.export import compare

    import models

    model, inputs, kwargs = models.build(name)
    result = compare(model, inputs, **kwargs)
    assert result.values and result.first_divergence is None and result.culprit is None, str(result)
    assert all(e <= 1e-4 for e in result.outputs)
    assert "every value agrees" in str(result)


def test_fused_kernels_are_met_with_the_operators_they_replace(torch):
    """cnn's relus are fused into its convolutions: each fused convolution is
    compared with the eager relu it stands for."""
    from kiln.export import compare

    import models

    model, inputs, _ = models.build("cnn")
    result = compare(model, inputs)
    fused = [(v.op, v.eager_op) for v in result.values if v.op != v.eager_op]
    assert ("kiln::fused_conv2d.default", "aten::relu.default") in fused, fused
    unfused = compare(model, inputs, optimize=False)
    assert len(unfused.values) > len(result.values)
    assert all(v.op == v.eager_op for v in unfused.values)


@pytest.mark.shared_runtime
def test_the_culprit_is_the_operator_whose_kernel_is_wrong(plugins):
    """libtier_above.so serves relu at a tier above the runtime's with a kernel
    that adds 1000 (tests/cpp/plugins/tier_above.cpp): compare must name that
    relu, in its module, while everything before it agrees; with the portable
    kernels forced, nothing differs."""
    script = textwrap.dedent(f"""
        import torch, kiln
        from kiln.export import compare

        class ScaledRelu(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x * 2.0)

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(8, 8)
                self.act = ScaledRelu()
                self.b = torch.nn.Linear(8, 4)

            def forward(self, x):
                return self.b(self.act(self.a(x)))

        torch.manual_seed(0)
        model, x = Model().eval(), torch.randn(2, 8)
        kiln.load_library({str(plugins / 'libtier_above.so')!r})
        result = compare(model, (x,))
        c = result.culprit
        print("CULPRIT", c.name, c.eager_op, c.op, c.module, c.kernel, c.error > 100)
        print("FIRST", result.first_divergence is c, all(v.ok for v in result.values[:c.index]))
        print("AFTER", [v.ok for v in result.values[c.index + 1:]])
        print("OUTPUT", result.outputs[0] > 1)
        print("PORTABLE", compare(model, (x,), kernels="portable").first_divergence)
        print(result)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=clean_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "CULPRIT relu aten::relu.default aten::relu.default act (ScaledRelu) tier 200 (libtier_above.so) True" \
        in lines, proc.stdout
    assert "FIRST True True" in lines and "AFTER [False]" in lines and "OUTPUT True" in lines, proc.stdout
    assert "PORTABLE None" in lines, proc.stdout
    assert any(line.startswith("culprit: #") and "'relu' (aten::relu.default" in line and "act (ScaledRelu)" in line
               for line in lines), proc.stdout


def test_compare_refuses_what_export_refuses(torch):
    from kiln.errors import ExportError
    from kiln.export import compare

    with pytest.raises(ExportError, match="expects a torch.nn.Module, got int"):
        compare(3, (torch.ones(2),))
    with pytest.raises(ExportError, match="the model has no method 'nope'"):
        compare(torch.nn.ReLU(), (torch.ones(2),), method="nope")
