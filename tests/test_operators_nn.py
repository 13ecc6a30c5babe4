"""Error paths of the operators of operator_cases_nn.py (their results are compared with eager in
test_operators.py): out-of-range scatter indices, conv_transpose2d arguments torch would never
export, grid_sample's bicubic mode and non-finite grids."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kiln

from models import Fn
from operator_cases_nn import randn


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("operators_nn")


@pytest.mark.parametrize("fn", [lambda x, i: x.scatter(1, i, 1.0), lambda x, i: x.scatter_add(1, i, x[:, :2]),
                                lambda x, i: x.scatter_reduce(1, i, x[:, :2], "amax")])
def test_scatter_index_out_of_range_is_an_execution_error(out_dir, fn):
    from kiln.export import export

    path = out_dir / "scatter_oob.kiln"
    x = randn(2, 3)
    export(Fn(fn).eval(), (x, torch.tensor([[0, 1], [2, 0]])), path)
    program = kiln.load(path)
    for bad in (3, -1):
        with pytest.raises(kiln.ExecutionError, match=f"index {bad} is out of bounds for dimension 1 with size 3"):
            program.forward(x.numpy(), np.array([[0, 1], [bad, 0]], dtype=np.int64))


@pytest.mark.parametrize("stride, padding, output_padding, groups, message", [
    ([2, 2], [0, 0], [2, 0], 1, "output_padding 2 \\(height\\) must be non-negative and smaller than either stride 2"),
    ([0, 1], [0, 0], [0, 0], 1, "stride 0 \\(height\\) must be in"),
    ([1, 1], [0, 9], [0, 0], 1, "output width -13 is too small"),
    ([1, 1], [0, 0], [0, 0], 3, "groups 3 must be in \\[1, 4\\] and divide the 4 input channels"),
    ([1 << 40, 1], [0, 0], [0, 0], 1, "stride 1099511627776 \\(height\\) must be in"),
])
def test_conv_transpose2d_bad_arguments_are_execution_errors(tmp_path, stride, padding, output_padding, groups,
                                                             message):
    """Arguments torch would never export, in a program built by hand: clear errors, no crash."""
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

    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, [1, 4, 3, 3], BOUND), TensorValue(FLOAT32, [4, 2, 3, 3], BOUND),
                ScalarValue("None"), ScalarValue("IntList", stride), ScalarValue("IntList", padding),
                ScalarValue("IntList", output_padding), ScalarValue("Int", groups), ScalarValue("IntList", [1, 1]),
                TensorValue(FLOAT32, [1, 2, 64, 64], PLANNED)]
    m.operators = [("aten::conv_transpose2d", "input")]
    m.instructions = [Instruction(0, list(range(8)), [8])]
    m.inputs, m.input_names = [0, 1], ["x", "w"]
    m.outputs, m.output_names = [8], ["y"]
    m.arena_sizes = [m.values[8].nbytes]
    path = tmp_path / "conv_transpose2d_bad.kiln"
    write_program(ProgramIR([m], [], producer="tests"), path)
    with pytest.raises(kiln.ExecutionError, match=message):
        kiln.load(path).forward(randn(1, 4, 3, 3).numpy(), randn(4, 2, 3, 3).numpy())


def test_grid_sample_bicubic_is_refused_at_export(out_dir):
    from kiln.export import export

    with pytest.raises(kiln.ExportError, match="interpolation mode 2 \\(bicubic\\)"):
        export(Fn(lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False)).eval(),
               (randn(1, 1, 3, 3), torch.zeros(1, 2, 2, 2)), out_dir / "grid_bicubic.kiln")


@pytest.mark.parametrize("mode, padding", [("bilinear", "zeros"), ("bilinear", "border"),
                                           ("bilinear", "reflection"), ("nearest", "zeros"), ("nearest", "border")])
def test_grid_sample_non_finite_and_huge_grid(out_dir, mode, padding):
    """NaN, infinite and huge grid coordinates never become an integer index out of range in the kernel.
    With zeros padding the result is eager's (zeros; NaN for a NaN or infinite coordinate in bilinear
    mode); border and reflection clip such coordinates where eager's vectorized code rounds differently,
    so only the shape is compared there."""
    from kiln.export import export

    path = out_dir / f"grid_nan_{mode}_{padding}.kiln"
    model = Fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=False)).eval()
    x, g = randn(1, 2, 3, 4), torch.zeros(1, 1, 4, 2)
    export(model, (x, g), path)
    bad = torch.tensor([[[[float("nan"), 0.0], [1e30, -1e30], [float("inf"), 0.5], [0.3, float("-inf")]]]])
    (got,) = kiln.load(path).forward(x.numpy(), bad.numpy())
    want = model(x, bad).numpy()
    assert got.shape == want.shape
    if padding == "zeros":
        np.testing.assert_array_equal(got, want)
