"""Mutable state (issue 5): module buffers updated in forward persist across
calls of one loaded method, reset on request, and are never shared between
two loaded methods or two loaded programs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kiln
from conftest import max_rel_error

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class Counter:
    """Builds (lazily, needs torch) a model whose buffer counts its calls."""

    @staticmethod
    def model(torch):
        class CountingScale(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("calls", torch.zeros(1))
                self.register_buffer("start", torch.full((1,), 10.0))  # read, never written

            def forward(self, x):
                self.calls += 1
                return x * self.calls + self.start

        return CountingScale().eval()


@pytest.fixture(scope="module")
def counter(tmp_path_factory):
    import torch
    from kiln.export import export

    path = tmp_path_factory.mktemp("state") / "counter.kiln"
    export(Counter.model(torch), (torch.ones(3),), path)
    return path


def test_state_persists_across_calls(counter):
    method = kiln.load(counter).method("forward")
    ones = np.ones(3, np.float32)
    for expected in (11, 12, 13, 14):
        (y,) = method(ones)
        np.testing.assert_array_equal(y, np.full(3, expected, np.float32))


def test_reset_restores_the_initial_state(counter):
    prog = kiln.load(counter)
    ones = np.ones(3, np.float32)
    prog.forward(ones)
    prog.forward(ones)
    prog.forward.reset_state()
    np.testing.assert_array_equal(prog.forward(ones)[0], np.full(3, 11, np.float32))
    prog.forward(ones)
    prog.reset_state()  # every method loaded through the program
    np.testing.assert_array_equal(prog.forward(ones)[0], np.full(3, 11, np.float32))


def test_methods_and_programs_never_share_state(counter):
    ones = np.ones(3, np.float32)
    prog = kiln.load(counter)
    first, second = prog.load_method("forward"), prog.load_method("forward")
    other_program = kiln.load(counter.read_bytes())
    for _ in range(3):
        first(ones)
    assert second(ones)[0][0] == 11
    assert other_program.forward(ones)[0][0] == 11
    assert prog.forward(ones)[0][0] == 11  # the program's own cached method is a third one
    assert first(ones)[0][0] == 14


def test_spec_lists_the_state(counter):
    spec = kiln.load(counter).method_spec("forward")
    assert [(s.name, s.shape, s.dtype) for s in spec.state_specs] == [("calls", (1,), "float32")]


def test_state_with_dynamic_shapes_matches_eager_over_many_calls(torch, exported):
    path, model, _, _ = exported("dynamic_state")
    eager = copy.deepcopy(model)
    method = kiln.load(path).load_method("forward")
    assert [s.name for s in method.state_specs] == ["calls", "summary"]
    for tokens in (3, 12, 1, 5, 5):
        x = torch.randn(2, tokens, 8)
        got = method(x.numpy())
        with torch.no_grad():
            want = eager(x)
        for g, w in zip(got, want):
            assert max_rel_error(g, w.numpy()) < 1e-5
    method.reset_state()
    fresh = copy.deepcopy(model)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        want = fresh(x)
    for g, w in zip(method(x.numpy()), want):
        assert max_rel_error(g, w.numpy()) < 1e-5


def test_returning_the_old_value_of_updated_state(torch, tmp_path):
    """An output that is the buffer before its update keeps the old value."""
    from kiln.export import export

    class Shift(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("last", torch.zeros(2))

        def forward(self, x):
            previous = self.last.clone()
            self.last.copy_(x)
            return previous

    path = tmp_path / "shift.kiln"
    export(Shift(), (torch.zeros(2),), path)
    method = kiln.load(path).method("forward")
    a, b = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    np.testing.assert_array_equal(method(a)[0], [0, 0])
    np.testing.assert_array_equal(method(b)[0], a)
    np.testing.assert_array_equal(method(a)[0], b)
