"""bfloat16 GEMMs (docs/kernels.md, "bfloat16 GEMMs"): kiln.load(gemm_precision=...), KILN_GEMM_PRECISION
and the default a bfloat16 model's program carries (metadata kiln.gemm_precision).

The reference here is torch's own bfloat16 rounding of both operands and a float64 sum: independent of
kiln's rounding code, and far enough from the float32 result that a path that skipped the rounding
fails.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kiln
from kiln.errors import InvalidArgument, KilnError

IN, HIDDEN, OUT = 96, 160, 48


@pytest.fixture(scope="module")
def mlp(torch):
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)).eval()


@pytest.fixture(scope="module")
def mlp_program(mlp, torch, tmp_path_factory):
    from kiln.export import export

    path = tmp_path_factory.mktemp("gemm_precision") / "mlp.kiln"
    export(mlp, (torch.randn(5, IN),), path)
    return path


def rounded(torch, a):
    """a rounded to bfloat16 by torch (nearest-even), as float64."""
    return torch.as_tensor(a).to(torch.bfloat16).to(torch.float64)


def bf16_reference(torch, mlp, x):
    """The MLP with each linear's input and weight rounded to bfloat16, summed in float64."""
    h = torch.as_tensor(x, dtype=torch.float64)
    for layer in mlp:
        if isinstance(layer, torch.nn.Linear):
            h = rounded(torch, h.float()) @ rounded(torch, layer.weight.detach()).T + layer.bias.detach().double()
        else:
            h = layer(h)
    return h.numpy()


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
def test_bfloat16_rounds_both_operands_of_each_linear(mlp, mlp_program, torch, kernels):
    x = np.random.default_rng(0).standard_normal((5, IN)).astype(np.float32)
    exact = kiln.load(mlp_program, kernels=kernels).method()
    method = kiln.load(mlp_program, kernels=kernels, gemm_precision="bfloat16").method()
    assert exact.gemm_precision == "float32" and method.gemm_precision == "bfloat16"
    got, f32 = method(x)[0], exact(x)[0]
    want = bf16_reference(torch, mlp, x)
    scale = np.abs(want).max()
    # float32 sums of rounded operands: a few float32 ulps of the largest output.
    assert np.abs(got - want).max() <= 1e-5 * scale
    # Skipping the rounding would land here, 2^-9 of each product away.
    assert np.abs(f32 - want).max() > 1e-4 * scale


def test_every_level_equals_portable_under_bfloat16(mlp_program):
    x = np.random.default_rng(1).standard_normal((5, IN)).astype(np.float32)
    ref = kiln.load(mlp_program, kernels="portable", gemm_precision="bfloat16").method()(x)[0]
    for isa in kiln.supported_isas():
        fast = kiln.load(mlp_program, isa=isa, gemm_precision="bfloat16").method()(x)[0]
        # One order of sums at every level and in the reference (docs/kernels.md): the same bits.
        np.testing.assert_array_equal(fast, ref, err_msg=isa)


def test_bfloat16_packs_weights_in_half_the_bytes(mlp_program):
    def packed(precision):
        return sum(i.packed_bytes for i in kiln.load(mlp_program, gemm_precision=precision).method().instructions)

    f32, bf16 = packed("float32"), packed("bfloat16")
    assert f32 > 0 and bf16 * 2 == f32


def test_environment_variable_and_option_precedence(mlp_program, monkeypatch):
    monkeypatch.setenv("KILN_GEMM_PRECISION", "bfloat16")
    assert kiln.load(mlp_program).method().gemm_precision == "bfloat16"
    assert kiln.load(mlp_program, gemm_precision="float32").method().gemm_precision == "float32"
    monkeypatch.setenv("KILN_GEMM_PRECISION", "half")
    with pytest.raises(InvalidArgument, match="KILN_GEMM_PRECISION is 'half'; expected 'float32' or 'bfloat16'"):
        kiln.load(mlp_program)


def test_unknown_precision_is_refused(mlp_program):
    with pytest.raises(InvalidArgument, match="gemm_precision is 'fp8'; expected 'float32' or 'bfloat16'"):
        kiln.load(mlp_program, gemm_precision="fp8")
    with pytest.raises(InvalidArgument, match="gemm_precision must be a str"):
        kiln.load(mlp_program, gemm_precision=16)


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 itself (AVX512_BF16 at the avx512_vnni level)."""
    return "avx512_bf16" in kiln.cpu_features() and kiln.detected_isa() == "avx512_vnni"


def test_bfloat16_model_defaults_to_bfloat16_gemms_where_the_cpu_has_them(mlp, torch, tmp_path):
    from kiln.export import export

    model = copy.deepcopy(mlp).to(torch.bfloat16)
    path = tmp_path / "bf16.kiln"
    report = export(model, (torch.randn(5, IN).bfloat16(),), path)
    assert any("round their operands to bfloat16" in n for n in report.notes)
    program = kiln.load(path)
    assert program.metadata("kiln.gemm_precision") == b"bfloat16"
    # Elsewhere the weights are converted: float32 is exact there and faster than the emulation.
    assert program.method().gemm_precision == ("bfloat16" if native_bf16() else "float32")
    assert kiln.load(path, isa="avx512").method().gemm_precision == "float32"
    assert kiln.load(path, gemm_precision="float32").method().gemm_precision == "float32"
    # An explicit request is honoured on any CPU (emulated where it must be).
    assert kiln.load(path, isa="baseline", gemm_precision="bfloat16").method().gemm_precision == "bfloat16"
    # The bfloat16 model's own forward rounds every intermediate to bfloat16 too: kiln keeps
    # float32 between the products, so it is only close to it.
    x = torch.randn(5, IN)
    got = kiln.load(path, gemm_precision="bfloat16").forward(x.numpy())[0]
    want = model(x.bfloat16()).float().detach().numpy()
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
    # A float32 model's program has no such default, and the caller's own key wins without a note.
    plain = tmp_path / "f32.kiln"
    export(mlp, (x,), plain)
    assert "kiln.gemm_precision" not in kiln.load(plain).metadata_keys
    report = export(model, (x.bfloat16(),), tmp_path / "mine.kiln", metadata={"kiln.gemm_precision": "float32"})
    assert not any("round their operands" in n for n in report.notes)
    assert kiln.load(tmp_path / "mine.kiln").method().gemm_precision == "float32"


def test_bad_precision_in_the_program_is_refused(mlp, torch, tmp_path):
    from kiln.export import export

    for value in ("fp8", ""):
        with pytest.raises(KilnError, match=f"kiln.gemm_precision' is '{value}'; expected 'float32' or 'bfloat16'"):
            export(mlp, (torch.randn(5, IN),), tmp_path / "bad.kiln", metadata={"kiln.gemm_precision": value})


def test_cli_takes_the_precision(mlp_program):
    import subprocess
    import sys

    from conftest import clean_env

    proc = subprocess.run([sys.executable, "-m", "kiln", "inspect", str(mlp_program), "--gemm-precision", "bfloat16"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "gemm precision bfloat16" in proc.stdout


def test_matmul_with_a_constant_weight_rounds_too(torch, tmp_path):
    from kiln.export import export

    class Projection(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(IN, OUT))

        def forward(self, x):
            return x @ self.w

    torch.manual_seed(3)
    model = Projection().eval()
    path = tmp_path / "proj.kiln"
    export(model, (torch.randn(2, 5, IN),), path)
    x = np.random.default_rng(2).standard_normal((2, 5, IN)).astype(np.float32)
    got = kiln.load(path, gemm_precision="bfloat16").forward(x)[0]
    want = (rounded(torch, x) @ rounded(torch, model.w.detach())).numpy()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    ref = kiln.load(path, kernels="portable", gemm_precision="bfloat16").forward(x)[0]
    np.testing.assert_array_equal(got, ref)
    assert np.abs(kiln.load(path).forward(x)[0] - want).max() > 1e-4 * np.abs(want).max()
