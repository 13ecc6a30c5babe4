"""Data-dependent output sizes: nonzero, masked_select, boolean-mask indexing (x[mask]) and unique.

torch.export names such a size with an unbacked symbol (u0); kiln plans memory for its bound (the
number of elements the producer reads, at the inputs' own bounds), reads the actual size off the
producer's output at run time, and every later size computed from it (views, cat, arange) follows.
Each case is exported once and run on several data (all False, all True, random, empty) through the
same loaded method, so the size shrinks and grows between calls, with both kernel tiers, against eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kiln

from conftest import assert_close
from models import Fn

GEN = torch.Generator().manual_seed(7)
NAN = float("nan")


def randn(*shape):
    return torch.randn(*shape, generator=GEN)


def rand_mask(*shape):
    return torch.rand(*shape, generator=GEN) > 0.5


def masks(*shape):
    """All False, all True, random: the size is 0, the bound, and in between."""
    return [torch.zeros(shape, dtype=torch.bool), torch.ones(shape, dtype=torch.bool), rand_mask(*shape),
            rand_mask(*shape)]


def _unique_all(x):
    v, inv, c = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
    return v, inv, c, v[inv] * 2  # the inverse used in an index


def _even_mask(*shape):
    """Masks whose true count is even (for a view that halves it)."""
    out = []
    for m in masks(*shape):
        flat = m.flatten().clone()
        if int(flat.sum()) % 2:
            flat[int(flat.nonzero()[0])] = False
        out.append(flat.view(shape))
    return out


X45 = randn(4, 5)
X345 = randn(3, 4, 5)
INTS = torch.randint(0, 5, (4, 5), generator=GEN)
SPECIAL = torch.tensor([[0.0, -0.0, NAN, 1.5], [NAN, 2.0, 0.0, 1.5], [-3.0, 1.5, 2.0, NAN]])

# name -> (function, list of input tuples (the first is the export example), dynamic_shapes)
CASES = {
    "mask_consumers": (lambda x, m: (x[m], x[m].sum(), x[m] * 2 + 1),
                       [(randn(4, 5), m) for m in masks(4, 5)], None),
    "mask_rows_then_flatten": (lambda x, m: x[m].reshape(-1) * 3, [(X45, m) for m in masks(4)], None),
    "mask_2d_at_dim1": (lambda x, m: x[:, m], [(X345, m) for m in masks(4, 5)], None),
    "mask_apart_from_int_index": (lambda x, i, m: x[i, :, m], [(X345, torch.tensor([i]), m)
                                                              for i, m in zip((2, -1, 0, 1), masks(5))], None),
    "mask_then_int_index": (lambda x, m, i: x[:, m, i], [(X345, m, torch.tensor([i]))
                                                         for i, m in zip((4, -5, 0, 2), masks(4))], None),
    "mask_int_and_bool_dtypes": (lambda a, b, m: (a[m], b[m]),
                                 [(INTS, INTS > 2, m) for m in masks(4, 5)], None),
    "nonzero": (lambda x: (torch.nonzero(x), torch.nonzero(x)[:, 0] + 1),
                [(SPECIAL,), (torch.zeros(3, 4),), (torch.ones(3, 4),), (randn(3, 4).round(),)], None),
    "nonzero_int_bool_3d": (lambda a, b: (torch.nonzero(a), torch.nonzero(b)),
                            [(INTS.view(2, 2, 5), m.view(5, 4)) for m in masks(4, 5)], None),
    "masked_select_broadcast": (lambda x, m: torch.masked_select(x, m) * 2,
                                [(X45, m) for m in masks(5)], None),
    # the mask broadcasts self to more elements than self has (torch's own range for the size is too small)
    "masked_select_mask_widens": (lambda x, m: torch.masked_select(x, m), [(randn(5), m) for m in masks(3, 5)],
                                  None),
    "unique_inverse_counts": (_unique_all, [(INTS,), (torch.zeros(4, 5, dtype=torch.int64),),
                                            (torch.arange(20).view(4, 5),)], None),
    "unique_float_nan": (_unique_all, [(SPECIAL,), (torch.full((3, 4), NAN),), (randn(3, 4).round(),)], None),
    "unique_plain_bool": (lambda m: torch.unique(m), [(m,) for m in masks(6)], None),
    "cat_after_mask": (lambda x, m, y: torch.cat([x[m], y]) * 2, [(X45, m, randn(3)) for m in masks(4, 5)], None),
    "arange_after_mask": (lambda x, m: torch.arange(x[m].shape[0]) * 3 + x[m].shape[0],
                          [(X45, m) for m in masks(4, 5)], None),
    "view_by_data_size": (lambda x, m: x[m].view(2, -1).sum(0), [(X45, m) for m in _even_mask(4, 5)], None),
    "nonzero_of_masked": (lambda x, m: torch.nonzero(x[m] > 0), [(randn(4, 5), m) for m in masks(4, 5)], None),
    "empty_input": (lambda x, m: (x[x > 0], torch.nonzero(x), torch.masked_select(x, m), x[m],
                                  *torch.unique(x, return_inverse=True, return_counts=True)),
                    [(torch.randn(0, 3), torch.zeros(0, 3, dtype=torch.bool))], None),
    "dynamic_rows": (lambda x: (x[x > 0] * 2, torch.nonzero(x), torch.masked_select(x, x < 0)),
                     [(randn(5, 3),), (randn(8, 3),), (torch.randn(0, 3),), (randn(2, 3),), (-torch.ones(1, 3),),
                      (randn(7, 3),)],
                     ({0: torch.export.Dim("n", min=0, max=8)},)),
    "dynamic_unique_and_mask_rows": (lambda x, m: (_unique_all(x)[0], x[m]),
                                     [(torch.randint(0, 4, (n, 2), generator=GEN), rand_mask(n))
                                      for n in (5, 8, 2, 6)],
                                     ({0: torch.export.Dim("rows", min=2, max=8)},
                                      {0: torch.export.Dim("rows", min=2, max=8)})),
}

KERNELS = [{"kernels": "portable"}, {}]
KERNEL_IDS = ["portable", "default"]
_EXPORTS: dict = {}


@pytest.fixture(scope="module")
def export_case(tmp_path_factory):
    """export_case(name) -> path; each case is exported once for the module."""
    from kiln.export import export

    def get(name):
        if name not in _EXPORTS:
            fn, data, dynamic = CASES[name]
            path = tmp_path_factory.mktemp("datadep") / f"{name}.kiln"
            # Fn.forward takes *args: its dynamic shapes are one tuple for `args`.
            export(Fn(fn), data[0], path, dynamic_shapes=(dynamic,) if dynamic else None)
            _EXPORTS[name] = path
        return _EXPORTS[name]

    return get


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


@pytest.mark.parametrize("options", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_eager_on_every_data(export_case, name, options):
    fn, data, _ = CASES[name]
    method = kiln.load(export_case(name), **options).method("forward")
    for i, inputs in enumerate(data):
        want = _as_list(fn(*inputs))
        got = method(*[t.numpy() for t in inputs])
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            what = f"{name}: data {i}, output {k}"
            assert g.dtype == w.numpy().dtype, what
            assert_close(g, w.numpy(), 1e-5, what)


def test_memory_is_planned_for_the_bound(export_case):
    """The output is planned for the largest size the data allows, and marked dynamic."""
    specs = kiln.load(export_case("mask_consumers")).method("forward").output_specs
    assert specs[0].shape == (20,) and specs[0].dynamic_dims == (0,)
    specs = kiln.load(export_case("mask_2d_at_dim1")).method("forward").output_specs
    assert specs[0].shape == (3, 20) and specs[0].dynamic_dims == (1,)
    # nonzero of a dynamic [n<=8, 3]: at most 24 rows of 2 coordinates.
    specs = kiln.load(export_case("dynamic_rows")).method("forward").output_specs
    assert [s.shape for s in specs] == [(24,), (24, 2), (24,)]
    specs = kiln.load(export_case("cat_after_mask")).method("forward").output_specs
    assert specs[0].shape == (23,)


def test_inspect_shows_the_bound(export_case):
    import sys
    from subprocess import run

    out = run([sys.executable, "-m", "kiln", "inspect", str(export_case("nonzero"))], capture_output=True,
              text=True, check=True).stdout
    assert "int64[0..12, 2]" in out, out


def test_a_size_from_item_is_refused(tmp_path):
    from kiln.errors import ExportError
    from kiln.export import export

    def fn(x):
        return torch.zeros((x > 0).sum().item()) + 1

    with pytest.raises(ExportError, match=r"depends on u\d+, a size computed from tensor data "
                                          r"by aten::_local_scalar_dense.*\.item\(\)"):
        export(Fn(fn), (randn(6),), tmp_path / "item.kiln")
    assert not (tmp_path / "item.kiln").exists()


def _branch_on_count(x):
    if len(x[x > 0]) > 0:
        return x * 2
    return x


@pytest.mark.parametrize("fn, expression", [
    (lambda x: torch.nonzero(x).view(-1), r"2\*u0 < 2"),   # a reshape torch cannot prove valid
    (_branch_on_count, r"u0"),                            # Python control flow on a data-dependent size
], ids=["reshape", "branch"])
def test_a_data_dependent_guard_asks_for_a_hint(tmp_path, fn, expression):
    from kiln.errors import ExportError
    from kiln.export import export

    with pytest.raises(ExportError, match=rf"data-dependent expression {expression}\. .*torch\._check\(") as info:
        export(Fn(fn), (randn(4, 5),), tmp_path / "guard.kiln")
    assert "torch._check_is_size" in str(info.value)
    assert not (tmp_path / "guard.kiln").exists()


def test_a_count_beyond_the_planned_bound_is_refused(tmp_path):
    """A (hand-made) program whose nonzero output holds 2 rows, run on 4 non-zero elements: a clear
    KernelFailure, nothing written past the output."""
    from kiln.export.lowering.ir import BOUND, FLOAT32, INT64, PLANNED, Instruction, MethodIR, ProgramIR, TensorValue
    from kiln.export.lowering.serialize import write_program

    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, [4], BOUND),
                TensorValue(INT64, [2, 1], PLANNED, arena=0, dynamic_dims=[0])]
    m.inputs, m.outputs, m.input_names, m.output_names = [0], [1], ["x"], ["y"]
    m.arena_sizes = [16]
    m.operators = [("aten::nonzero", "default")]
    m.instructions = [Instruction(0, [0], [1])]
    write_program(ProgramIR([m], [], producer="tests"), tmp_path / "small.kiln")
    method = kiln.load(tmp_path / "small.kiln").method("forward")
    np.testing.assert_array_equal(method(np.array([0, 1, 0, 2], np.float32))[0], [[1], [3]])
    with pytest.raises(kiln.ExecutionError, match=r"aten::nonzero.default: the result has \[4, 1\] elements .* "
                                                 r"more than the 16 bytes the program planned"):
        method(np.ones(4, np.float32))
