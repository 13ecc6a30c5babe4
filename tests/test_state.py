"""Mutable state (docs/format.md): module buffers updated in forward persist across
calls of one loaded method, reset on request, and are never shared between
two loaded methods or two loaded programs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kiln

from conftest import assert_close

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
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w.numpy(), 1e-5)
    method.reset_state()
    fresh = copy.deepcopy(model)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        want = fresh(x)
    got = method(x.numpy())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w.numpy(), 1e-5)


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


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_one_buffer_takes_another_buffers_old_value(torch, tmp_path, order):
    """prev <- cur; cur <- cur + x: every new value is computed from old values,
    whatever order the buffers were registered (and their moves emitted) in."""
    from kiln.export import export

    class History(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name in order:
                self.register_buffer(name, torch.tensor([1.0, 2.0]) if name == "a" else torch.tensor([10.0, 20.0]))

        def forward(self, x):
            before = self.a * 1, self.b * 1  # the state as this call found it
            self.a.copy_(self.b)
            self.b.add_(x)
            return before

    path = tmp_path / "history.kiln"
    model = History()
    eager = copy.deepcopy(model)
    export(model, (torch.ones(2),), path)
    method = kiln.load(path).method("forward")
    for _ in range(3):
        got = method(np.ones(2, np.float32))
        want = eager(torch.ones(2))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())


def test_cache_update_that_also_reads_the_cache(torch, tmp_path):
    """The buffer is the update's values as well as its self: no in-place write."""
    from kiln.export import export

    class Rotate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.arange(4.0))

        def forward(self, idx):
            self.buf.index_copy_(0, idx, self.buf.clone())
            return self.buf * 1

    model = Rotate()
    eager = copy.deepcopy(model)
    path = tmp_path / "rotate.kiln"
    export(model, (torch.tensor([1, 2, 3, 0]),), path)
    method = kiln.load(path).method("forward")
    idx = np.array([1, 2, 3, 0])
    for _ in range(3):
        np.testing.assert_array_equal(method(idx)[0], eager(torch.from_numpy(idx)).numpy())


def test_slice_assignment_to_a_buffer(torch, tmp_path):
    """`buf[i:j] = x` (copy + slice_scatter) updates the state like eager."""
    from kiln.export import export

    class Window(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(8))

        def forward(self, x):
            self.buf[2:6] = x
            self.buf[0] = self.buf[0] + 1   # a scalar broadcast into a slice
            return self.buf * 1

    model = Window()
    eager = copy.deepcopy(model)
    path = tmp_path / "window.kiln"
    export(model, (torch.ones(4),), path)
    method = kiln.load(path).method("forward")
    for step in range(3):
        x = torch.full((4,), float(step))
        np.testing.assert_array_equal(method(x.numpy())[0], eager(x).numpy())


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_a_buffer_copied_from_an_input_of_another_shape_or_dtype(torch, tmp_path, dtype):
    """copy_ broadcasts and casts into the buffer; the state keeps its shape and dtype."""
    from kiln.export import export

    class Fill(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("grid", torch.zeros(2, 3, dtype=getattr(torch, dtype)))

        def forward(self, row):
            before = self.grid + 1
            self.grid.copy_(row)
            return before

    model = Fill()
    eager = copy.deepcopy(model)
    path = tmp_path / "fill.kiln"
    export(model, (torch.ones(3),), path)
    method = kiln.load(path).method("forward")
    assert method.state_specs[0].shape == (2, 3) and method.state_specs[0].dtype == dtype
    for step in range(3):
        row = torch.arange(3.0) + step
        (got,) = method(row.numpy())
        want = eager(row)
        assert got.shape == (2, 3) and got.dtype == want.numpy().dtype
        np.testing.assert_array_equal(got, want.numpy())


def test_a_counter_advanced_by_a_dynamic_size(torch, tmp_path):
    """pos += tokens.shape[1]: a symbolic size used as a tensor operand."""
    from kiln.export import export

    class Position(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", torch.zeros(1, dtype=torch.int64))

        def forward(self, tokens):
            start = self.pos + 0
            self.pos.add_(tokens.shape[1])
            return start, tokens + tokens.shape[1]

    model = Position()
    eager = copy.deepcopy(model)
    path = tmp_path / "pos.kiln"
    export(model, (torch.zeros(1, 3, dtype=torch.int64),), path,
           dynamic_shapes=({1: torch.export.Dim("t", max=16)},))
    method = kiln.load(path).method("forward")
    for t in (5, 1, 16, 2):
        x = torch.arange(t).view(1, t)
        got = method(x.numpy())
        want = eager(x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())


CHILD_MEASURES_THE_CACHE = """
import sys
import numpy as np
import kiln

def anon_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))

before = anon_kib()
method = kiln.load(sys.argv[1]).method("forward")
rows = np.array([5, 9000], np.int64)
values = np.arange(2 * 1024, dtype=np.float32).reshape(2, 1024)
(got,) = method(rows, values, np.array([5, 9000, 100], np.int64))
assert np.array_equal(got[:2], values) and not got[2].any(), got
written = anon_kib()
method.reset_state()
(got,) = method(np.array([7], np.int64), values[:1], np.array([5, 9000, 7], np.int64))
assert not got[:2].any() and np.array_equal(got[2], values[0]), got
print(written - before)
"""


def test_a_zero_state_costs_only_the_pages_written(torch, tmp_path):
    """A zero-initialized buffer (a KV cache) is committed page by page as calls write it, and reset
    gives its pages back: loading a 64 MiB cache and writing two rows holds a few pages, not 64 MiB,
    and the rows written before the reset read as zero after it."""
    import subprocess
    import sys

    from kiln.export import export

    class RowCache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(16384, 1024))  # 64 MiB of float32

        def forward(self, write_rows, values, read_rows):
            self.cache.index_copy_(0, write_rows, values)
            return self.cache.index_select(0, read_rows)

    path = tmp_path / "row_cache.kiln"
    written, read = torch.export.Dim("written", max=64), torch.export.Dim("read", max=64)
    export(RowCache(), (torch.tensor([1, 2]), torch.ones(2, 1024), torch.tensor([1, 2, 3])), path,
           dynamic_shapes=({0: written}, {0: written}, {0: read}))
    proc = subprocess.run([sys.executable, "-c", CHILD_MEASURES_THE_CACHE, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    grown_mib = int(proc.stdout.split()[-1]) / 1024
    print(f"{grown_mib:.1f} MiB")
    assert grown_mib < 24, f"loading and writing two rows of a 64 MiB cache took {grown_mib:.1f} MiB"
