"""Dynamic shapes (issue 5): dimensions declared with torch.export.Dim(max=...)
are planned for their bound, run at any size within it, and are refused
beyond it with InvalidInput."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kiln
from conftest import max_rel_error

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture(scope="module")
def dynamic(exported):
    path, model, inputs, _ = exported("dynamic_state")
    return path, model


def test_spec_records_bounds_and_dynamic_dims(dynamic):
    spec = kiln.load(dynamic[0]).method_spec("forward")
    (x,) = spec.input_specs
    assert x.shape == (2, 12, 8) and x.dynamic_dims == (1,)
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
            assert max_rel_error(g, w) < 1e-5, (tokens, call)


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
        assert max_rel_error(got[0], want[0].numpy()) < 1e-5


@pytest.mark.parametrize("shape, what", [((2, 13, 8), "wrong shape"), ((3, 5, 8), "wrong shape"),
                                         ((2, 5, 9), "wrong shape"), ((2, 5), "number of dimensions")])
def test_sizes_beyond_the_bound_or_static_dims_are_refused(dynamic, shape, what):
    method = kiln.load(dynamic[0]).load_method("forward")
    with pytest.raises(kiln.InvalidInput, match=what) as info:
        method(np.zeros(shape, np.float32))
    assert "f32[2, 12, 8]" in str(info.value)  # names the bound


def test_two_dynamic_dims_in_attention(torch, tmp_path):
    """Batch and sequence both dynamic through attention (matmul, softmax, views)."""
    import models
    from kiln.export import export

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
        assert max_rel_error(got, want) < 1e-4, (b, s)


def test_data_dependent_sizes_are_refused(torch, tmp_path):
    from kiln.errors import ExportError
    from kiln.export import export

    class Nonzero(torch.nn.Module):
        def forward(self, x):
            return torch.arange(int((x > 0).sum().item()))

    with pytest.raises(ExportError):
        export(Nonzero(), (torch.randn(8),), tmp_path / "nz.kiln")
    assert not (tmp_path / "nz.kiln").exists()
