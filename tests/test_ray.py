"""kiln.ray on a local Ray cluster (docs/scaling.md): map_batches against a plain loop over the same rows.

One Ray cluster (2 CPUs, no dashboard) serves the module; each test is bounded
by an alarm. Models come from tests/models.py: a dynamic batch (up to 64 rows),
one from 2 to 8 rows, a fixed batch of 4 (MLP) and a fixed batch of 2 with an
embedding (TiedEmbedding, to make a batch fail with an index out of range).
"""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest

import kiln
import kiln.ray

from conftest import assert_close

try:
    import ray
except ImportError:  # the test extra installs it; a missing ray must not pass for a green run
    ray = None

TIME_LIMIT_S = 120  # per test; the module usually takes under a minute on 2 loaded cores
ROWS = 300


@pytest.fixture(scope="module")
def cluster():
    if ray is None:
        pytest.fail("ray is not installed: pip install 'ray[data]==2.60.0' (the test extra and scripts/setup.sh do)",
                    pytrace=False)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local, private cluster: no token banner
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             logging_level="ERROR")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def time_limit():
    def expired(signum, frame):
        raise TimeoutError(f"test took longer than {TIME_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TIME_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def rows(n=ROWS, features=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, features), dtype=np.float32)


# The default (fastest) kernels on both sides, as a user runs them: Ray may hand an actor a 1-row
# batch at a block boundary, which the plain loop meets too.
KERNELS = ""


def plain_loop(path, x, rows_per_call):
    """The reference: kiln called directly, `rows_per_call` rows at a time."""
    method = kiln.load(path, kernels=KERNELS).forward
    return np.concatenate([method(x[i:i + rows_per_call])[0] for i in range(0, len(x), rows_per_call)])


def collect(ds, column="y"):
    """(ids, column) of a dataset's rows, sorted by id (actors may finish out of order)."""
    batch = ds.take_batch(batch_size=ds.count(), batch_format="numpy")
    order = np.argsort(batch["id"])
    values = np.stack(list(batch[column])) if batch[column].dtype == object else batch[column]
    return batch["id"][order], values[order]


def dataset(x):
    return ray.data.from_items([{"x": row, "id": i, "name": f"row {i}"} for i, row in enumerate(x)])


# -- through Ray -------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [100, 7])  # larger than the bound (64): split; smaller: as is
def test_dynamic_batch_equals_plain_loop(cluster, exported, batch_size):
    path = exported("mlp_dynamic_batch")[0]
    x = rows()
    ds = kiln.ray.map_batches(dataset(x), path, input_columns=["x"], output_columns=["y"], keep_columns=["id"],
                              kernels=KERNELS, actors=2, cpus_per_actor=1, batch_size=batch_size)
    ids, y = collect(ds)
    assert ids.tolist() == list(range(ROWS))  # every row once: no chunk dropped or repeated
    assert_close(y, plain_loop(path, x, 1), 1e-5)


def test_fixed_batch_is_padded_and_split(cluster, exported):
    path = exported("mlp")[0]  # exactly 4 rows per call
    assert kiln.load(path).forward.input_specs[0].shape == (4, 32)
    x = rows(ROWS + 3)  # not a multiple of 4 anywhere
    ds = kiln.ray.map_batches(dataset(x), path, input_columns=["x"], output_columns=["y"], keep_columns=["id"],
                              kernels=KERNELS, actors=1, batch_size=10)
    ids, y = collect(ds)
    assert ids.tolist() == list(range(ROWS + 3))
    assert_close(y, plain_loop(path, np.concatenate([x, x[-1:]]), 4)[:ROWS + 3], 1e-5)


def test_batches_below_the_minimum_are_padded(cluster, exported):
    path = exported("mlp_batch_2_to_8")[0]
    x = rows(41)
    ds = kiln.ray.map_batches(dataset(x), path, input_columns=["x"], output_columns=["y"], keep_columns=["id"],
                              kernels=KERNELS, actors=1, batch_size=5)  # 41 = 8 * 5 + 1: at least one batch of 1 row
    ids, y = collect(ds)
    assert ids.tolist() == list(range(41))
    assert_close(y, plain_loop(path, np.concatenate([x, x[-1:]]), 2)[:41], 1e-5)


@pytest.mark.parametrize("batch_format", ["pandas", "pyarrow"])
def test_pandas_and_pyarrow_batches(cluster, exported, batch_format):
    path = exported("mlp_dynamic_batch")[0]
    x = rows(90)
    ds = kiln.ray.map_batches(dataset(x), path, input_columns=["x"], output_columns=["y"],
                              keep_columns=["id", "name"], kernels=KERNELS, actors=1, batch_size=50,
                              batch_format=batch_format)
    ids, y = collect(ds)
    assert ids.tolist() == list(range(90))
    assert_close(y, plain_loop(path, x, 1), 1e-5)
    names = ds.take_batch(batch_size=90, batch_format="numpy")
    assert all(name == f"row {i}" for i, name in zip(names["id"], names["name"]))  # kept columns as they came


def test_a_failing_batch_names_its_rows(cluster, exported):
    path = exported("tied")[0]  # ids [2, 7] into a vocabulary of 100
    ids = np.random.default_rng(1).integers(0, 100, (40, 7))
    ids[23, 4] = 1000
    ds = ray.data.from_items([{"ids": row, "id": i} for i, row in enumerate(ids)])
    ds = kiln.ray.map_batches(ds, path, input_columns=["ids"], output_columns=["logits"], id_column="id",
                              actors=1, batch_size=10)
    with pytest.raises(Exception) as info:
        ds.materialize()
    message = str(info.value)
    assert "index 1000 out of range for 100 embeddings" in message, message
    found = re.search(r"kiln\.ray: batch \d+ of this actor \((\d+) rows\) failed in rows (\d+)\.\.(\d+) "
                      r"\(id (\d+)\.\.(\d+)\)", message)
    assert found, message
    size, start, stop, first, last = map(int, found.groups())
    assert stop - start == 1 and first <= 23 <= last and last - first == 1, message  # the 2-row chunk with row 23


def test_actor_threads_follow_num_cpus(cluster, exported):
    path = str(exported("mlp_dynamic_batch")[0])
    assert kiln.num_threads() != 1  # the default pool (one thread per core) differs from what Ray assigns

    @ray.remote(num_cpus=1)
    class Probe:
        def __init__(self):
            import kiln.ray

            self.predictor = kiln.ray.Predictor(path)

        def threads(self):
            import kiln

            return kiln.num_threads()

    probe = Probe.remote()
    try:
        assert ray.get(probe.threads.remote(), timeout=60) == 1
    finally:
        ray.kill(probe)


# -- without Ray (the Predictor is a plain callable) ----------------------------------------------


def test_a_batch_is_split_at_the_bound_and_reassembled(exported):
    path = exported("mlp_dynamic_batch")[0]  # up to 64 rows a call: 150 = 64 + 64 + 22
    x = rows(150)
    out = kiln.ray.Predictor(path, input_columns=["x"], output_columns=["y"], kernels=KERNELS)({"x": x})
    assert list(out) == ["y"]
    assert_close(out["y"], plain_loop(path, x, 1), 1e-5)


def test_refuses_small_batches_when_asked(exported):
    path = exported("mlp_batch_2_to_8")[0]
    predictor = kiln.ray.Predictor(path, input_columns=["x"], pad_small=False, kernels=KERNELS)
    assert (predictor.min_rows, predictor.max_rows) == (2, 8)
    assert predictor({"x": rows(2)})["output_0"].shape == (2, 10)
    with pytest.raises(kiln.InvalidInput, match=r"batch 2 of this actor \(1 rows\) failed in rows 0\.\.0 .*"
                                                r"1 row\(s\), fewer than the 2 the method takes"):
        predictor({"x": rows(1)})


def test_ragged_columns_are_padded_or_refused(exported):
    path = exported("mlp_dynamic_batch")[0]
    ragged = np.empty(3, object)
    ragged[:] = [np.ones(32, np.float32), np.ones(30, np.float32), np.ones(32, np.float32)]
    with pytest.raises(kiln.InvalidInput, match=r"column 'x' has rows of different shapes.*pad_ragged"):
        kiln.ray.Predictor(path, input_columns=["x"])({"x": ragged})
    predictor = kiln.ray.Predictor(path, input_columns=["x"], pad_ragged={"x": 0.0}, kernels=KERNELS)
    y = predictor({"x": ragged})["output_0"]
    padded = np.ones((3, 32), np.float32)
    padded[1, 30:] = 0
    assert_close(y, plain_loop(path, padded, 1), 1e-5)


def test_local_copy_downloads_once(tmp_path):
    calls = []

    def download(source, dest):
        calls.append(source)
        with open(dest, "wb") as f:
            f.write(b"program")

    dest = tmp_path / "cache" / "model.kiln"
    assert kiln.ray.local_copy("s3://bucket/model.kiln", dest, download) == str(dest)
    assert kiln.ray.local_copy("s3://bucket/model.kiln", dest, download) == str(dest)
    assert calls == ["s3://bucket/model.kiln"] and dest.read_bytes() == b"program"
