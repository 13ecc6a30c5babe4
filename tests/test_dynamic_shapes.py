"""Dynamic shapes (docs/format.md): dimensions declared with torch.export.Dim(max=...)
are planned for their bound, run at any size within it, and are refused
beyond it with InvalidInput."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kiln

from conftest import assert_close

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture(scope="module")
def dynamic(exported):
    path, model, inputs, _ = exported("dynamic_state")
    return path, model


def test_spec_records_bounds_and_dynamic_dims(dynamic):
    spec = kiln.load(dynamic[0]).method_spec("forward")
    (x,) = spec.input_specs
    assert x.shape == (2, 12, 8) and x.dynamic_dims == (1,) and x.min_shape == (2, 0, 8)
    assert spec.output_specs[0].shape == (2, 2, 24) and spec.output_specs[0].dynamic_dims == (2,)
    assert spec.output_specs[1].dynamic_dims == ()


@pytest.mark.parametrize("tokens", [1, 2, 5, 7, 12])
def test_any_size_within_the_bound_matches_eager(torch, dynamic, tokens):
    path, model = dynamic
    eager = copy.deepcopy(model)
    method = kiln.load(path).load_method("forward")
    for call in range(2):  # a second call sees the state the first one left
        x = torch.randn(2, tokens, 8)
        got = method(x.numpy())
        with torch.no_grad():
            want = [t.numpy() for t in eager(x)]
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            assert_close(g, w, 1e-5, f"tokens {tokens}, call {call}")


def test_sizes_change_between_calls_of_one_method(torch, dynamic):
    path, model = dynamic
    eager = copy.deepcopy(model)
    method = kiln.load(path).load_method("forward")
    for tokens in (12, 1, 6, 12, 3):
        x = torch.randn(2, tokens, 8)
        got = method(x.numpy())
        with torch.no_grad():
            want = eager(x)
        assert got[0].shape == (2, 2, 2 * tokens)
        assert_close(got[0], want[0].numpy(), 1e-5)


@pytest.mark.parametrize("shape, what", [((2, 13, 8), "wrong shape"), ((3, 5, 8), "wrong shape"),
                                         ((2, 5, 9), "wrong shape"), ((2, 5), "number of dimensions")])
def test_sizes_beyond_the_bound_or_static_dims_are_refused(dynamic, shape, what):
    method = kiln.load(dynamic[0]).load_method("forward")
    with pytest.raises(kiln.InvalidInput, match=what) as info:
        method(np.zeros(shape, np.float32))
    assert "f32[2, 0..12, 8]" in str(info.value)  # names the range of the dynamic dim


def test_two_dynamic_dims_in_attention(torch, tmp_path):
    """Batch and sequence both dynamic through attention (matmul, softmax, views)."""
    from kiln.export import export

    import models

    torch.manual_seed(1)
    model = models.EncoderBlock().eval()
    batch, seq = torch.export.Dim("batch", max=4), torch.export.Dim("seq", max=32)
    path = tmp_path / "enc.kiln"
    export(model, (torch.randn(2, 16, 64),), path, dynamic_shapes=({0: batch, 1: seq},))
    method = kiln.load(path).method("forward")
    assert method.input_specs[0].shape == (4, 32, 64)
    for b, s in [(1, 1), (4, 32), (3, 7), (2, 16)]:
        x = torch.randn(b, s, 64)
        with torch.no_grad():
            want = model(x).numpy()
        (got,) = method(x.numpy())
        assert got.shape == want.shape
        assert_close(got, want, 1e-4, f"batch {b}, sequence {s}")


def test_data_dependent_sizes_are_refused(torch, tmp_path):
    from kiln.errors import ExportError
    from kiln.export import export

    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return torch.arange(int((x > 0).sum().item()))

    with pytest.raises(ExportError, match=r"method 'forward': .*data-dependent expression u0"):
        export(Nonzero(), (torch.randn(8),), tmp_path / "nz.kiln")
    assert not (tmp_path / "nz.kiln").exists()


def _export(torch, tmp_path, model, inputs, dynamic_shapes):
    from kiln.export import export

    path = tmp_path / "m.kiln"
    export(model, inputs, path, dynamic_shapes=dynamic_shapes)
    return kiln.load(path).method("forward")


def test_a_declared_minimum_is_enforced(torch, tmp_path):
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    method = _export(torch, tmp_path, Double(), (torch.randn(5),), ({0: torch.export.Dim("n", min=3, max=9)},))
    assert method.input_specs[0].min_shape == (3,)
    np.testing.assert_array_equal(method(np.ones(3, np.float32))[0], np.full(3, 2, np.float32))
    with pytest.raises(kiln.InvalidInput, match=r"expected f32\[3\.\.9\], got f32\[2\]"):
        method(np.ones(2, np.float32))


def test_inputs_sharing_a_dimension_must_agree(torch, tmp_path):
    class Pair(torch.nn.Module):
        def forward(self, tokens, positions):
            return tokens.float() + positions.float()[None, :]

    t = torch.export.Dim("t", max=16)
    method = _export(torch, tmp_path, Pair(), (torch.zeros(1, 4, dtype=torch.int64), torch.arange(4)),
                     ({1: t}, {0: t}))
    (y,) = method(np.ones((1, 6), np.int64), np.arange(6))
    np.testing.assert_array_equal(y, 1 + np.arange(6, dtype=np.float32)[None])
    with pytest.raises(kiln.InvalidInput, match=r"input 'positions' dimension 0 must be .*input 'tokens'.*\(5 vs 6\)"):
        method(np.ones((1, 6), np.int64), np.arange(5))


def test_derived_dimensions(torch, tmp_path):
    """A dim declared as 2*n: n is read off it, and an odd size is refused."""
    class Halves(torch.nn.Module):
        def forward(self, x):
            a, b = x.view(2, -1)
            return a * b

    n = torch.export.Dim("n", max=8)
    method = _export(torch, tmp_path, Halves(), (torch.randn(6),), ({0: 2 * n},))
    for size in (4, 10, 16):
        x = np.arange(size, dtype=np.float32)
        np.testing.assert_array_equal(method(x)[0], x[: size // 2] * x[size // 2:])
    with pytest.raises(kiln.InvalidInput, match="must be 2"):
        method(np.ones(7, np.float32))


def test_min_max_and_modulo_of_sizes(torch, tmp_path):
    class SizeArithmetic(torch.nn.Module):
        def forward(self, x):
            n = x.shape[0]
            return x[: torch.sym_min(n, 5)] * 2, torch.zeros(n % 3 + 1) + x.sum(), x[: n - n % 4]

    model = SizeArithmetic()
    method = _export(torch, tmp_path, model, (torch.randn(7),), ({0: torch.export.Dim.AUTO(min=0, max=16)},))
    for size in (2, 3, 5, 7, 16):
        x = torch.randn(size)
        got = method(x.numpy())
        want = model(x)
        assert [g.shape for g in got] == [tuple(w.shape) for w in want], size
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6)


def test_derived_dims_accept_every_size_torch_declares_valid(torch, tmp_path):
    class Cat(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y]) * 2

    n = torch.export.Dim("n", max=16)
    method = _export(torch, tmp_path, Cat(), (torch.randn(4), torch.randn(5)), ({0: 2 * n}, {0: 2 * n + 1}))
    assert [s.min_shape for s in method.input_specs] == [(0,), (1,)]
    for size in (0, 1, 2, 16):
        x, y = np.ones(2 * size, np.float32), np.ones(2 * size + 1, np.float32)
        np.testing.assert_array_equal(method(x, y)[0], np.full(4 * size + 1, 2, np.float32))
    with pytest.raises(kiln.InvalidInput, match="must be 2"):
        method(np.ones(4, np.float32), np.ones(4, np.float32))
