"""One Method called from many Python threads (program.forward shares one
loaded Method): calls take turns, each caller gets its own answer, and state
advances one whole call at a time (docs/threads-and-files.md).

Every result is compared with the answer computed alone. The thread counts and
call counts are modest; what makes these tests fail without the per-Method turn
is that the bindings release the GIL while a method executes.
"""

import threading

import numpy as np
import pytest

import kiln

from conftest import assert_close

THREADS = 8
CALLS = 40  # per thread


def run_threads(worker, threads=THREADS):
    """Runs worker(t) on `threads` threads started together; re-raises the first failure."""
    errors = []
    barrier = threading.Barrier(threads)

    def body(t):
        try:
            barrier.wait()
            worker(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    if errors:
        raise errors[0]


def check_one_method_from_many_threads(path, inputs) -> None:
    """THREADS threads call program.forward (one shared Method) CALLS times each on `inputs`;
    every result must equal a separate Method's answer for the same input."""
    program = kiln.load(path)
    alone = kiln.load(path).method("forward")
    expected = [alone(x)[0] for x in inputs]
    wrong = []

    def worker(t):
        for i in range(CALLS):
            k = (t * 4 + i) % len(inputs)
            (got,) = program.forward(inputs[k])
            try:
                assert_close(got, expected[k], 1e-6)
            except AssertionError as e:
                wrong.append(f"thread {t} call {i} (input {k}, {inputs[k].shape}): {e}")

    run_threads(worker)
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} results wrong, e.g. {wrong[:3]}"


def test_one_method_fixed_shapes(exported):
    path, *_ = exported("encoder")
    rng = np.random.default_rng(1)
    check_one_method_from_many_threads(path, [rng.standard_normal((2, 16, 64)).astype(np.float32)
                                              for _ in range(THREADS * 4)])


def test_one_method_dynamic_shapes(exported):
    """Each thread passes its own batch size: a caller must never get another's rows."""
    path, *_ = exported("mlp_dynamic_batch")
    rng = np.random.default_rng(2)
    check_one_method_from_many_threads(path, [rng.standard_normal((1 + (k * 9) % 64, 32)).astype(np.float32)
                                              for k in range(THREADS * 4)])


def test_state_advances_one_call_at_a_time(exported):
    """dynamic_state counts its calls in a buffer and scales its output by the
    count: over all threads, every count from 1 to N is seen exactly once, and
    each output is the single-call output times its count."""
    path, *_ = exported("dynamic_state")
    program = kiln.load(path)
    x = np.random.default_rng(3).standard_normal((2, 5, 8)).astype(np.float32)
    base, _ = kiln.load(path).method("forward")(x)  # count 1
    nonzero = np.abs(base) > 1e-3
    assert nonzero.any()
    counts, wrong = [], []
    lock = threading.Lock()

    def worker(t):
        for _ in range(CALLS):
            y, _summary = program.forward(x)
            ratio = y[nonzero] / base[nonzero]
            count = int(round(float(ratio.mean())))
            try:
                assert_close(y, base * count, 1e-5)
            except AssertionError as e:
                wrong.append(str(e))
            with lock:
                counts.append(count)

    run_threads(worker)
    assert not wrong, wrong[:3]
    assert sorted(counts) == list(range(1, THREADS * CALLS + 1))


def test_reset_state_waits_for_the_call_in_progress(exported):
    """reset_state() from another thread lands between calls, never inside one:
    every output is the single-call output times a whole count."""
    path, *_ = exported("dynamic_state")
    program = kiln.load(path)
    x = np.random.default_rng(4).standard_normal((2, 5, 8)).astype(np.float32)
    base, _ = kiln.load(path).method("forward")(x)
    nonzero = np.abs(base) > 1e-3
    stop = threading.Event()
    wrong = []

    def resetter():
        while not stop.is_set():
            program.forward.reset_state()

    def worker(t):
        for _ in range(CALLS):
            y, _ = program.forward(x)
            ratio = y[nonzero] / base[nonzero]
            count = round(float(ratio.mean()))
            try:
                assert count >= 1
                assert_close(y, base * count, 1e-5)
            except AssertionError as e:
                wrong.append(str(e))

    r = threading.Thread(target=resetter)
    r.start()
    try:
        run_threads(worker, threads=4)
    finally:
        stop.set()
        r.join()
    assert not wrong, wrong[:3]


def test_first_use_from_many_threads_loads_one_method(exported):
    """program.forward loaded lazily by many threads at once is one Method:
    the state of every call lands in the same place."""
    path, *_ = exported("dynamic_state")
    program = kiln.load(path)
    x = np.ones((2, 5, 8), np.float32)
    run_threads(lambda t: program.forward(x))
    assert program.forward is program.method("forward")
    base, _ = kiln.load(path).method("forward")(x)
    y, _ = program.forward(x)
    nonzero = np.abs(base) > 1e-3
    assert_close(y, base * (THREADS + 1), 1e-5)
    assert nonzero.any()


def test_errors_reach_their_own_caller(exported):
    """A bad call on one thread fails there, with its own message, and does not
    disturb the good calls of the others."""
    path, *_ = exported("mlp")
    program = kiln.load(path)
    good = np.random.default_rng(5).standard_normal((4, 32)).astype(np.float32)
    (want,) = kiln.load(path).forward(good)
    failures = []

    def worker(t):
        for i in range(CALLS // 2):
            if t % 2:
                with pytest.raises(kiln.InvalidInput, match=r"wrong shape: expected f32\[4, 32\], got f32\[3, 32\]"):
                    program.forward(np.zeros((3, 32), np.float32))
            else:
                (got,) = program.forward(good)
                if not np.array_equal(got, want):
                    failures.append(i)

    run_threads(worker)
    assert not failures


def test_an_input_conversion_that_calls_its_method_again_is_busy(exported):
    """A __dlpack__ that runs the method it is an input of: the inner call is refused (it
    would wait for itself forever), and the outer call says so rather than that the
    input was not an array."""
    path, *_ = exported("mlp")
    method = kiln.load(path).method("forward")
    x = np.zeros(method.input_specs[0].shape, np.float32)
    inner = []

    class Reentrant:
        def __dlpack__(self, stream=None, **kwargs):
            try:
                method(x)
            except kiln.Busy as e:
                inner.append(e)
                raise
            return x.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(kiln.Busy, match="called again from inside its own call"):
        method(Reentrant())
    assert inner and "called again from inside its own call" in str(inner[0])
    assert np.array_equal(method(x)[0], method(x)[0])  # still usable
