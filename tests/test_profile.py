"""The profiler (docs/profiling.md): Method.profile, kiln profile and kiln bench.

What is checked is what a profile must be whatever the machine's speed: one
record per executed instruction with its operator, kernel and run-time shapes;
spans that nest (instructions inside their call, one after another, pool chunks
inside their instruction); a trace that parses as Chrome trace event JSON with
one span per call, instruction and chunk. No test compares times with a
threshold; bench/profiler_overhead.py measures what profiling costs.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import kiln

from conftest import assert_close, clean_env


class Wide(torch.nn.Module):
    """Large enough that the portable and optimized GEMMs split across the pool."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 512)
        self.b = torch.nn.Linear(512, 256)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    from kiln.export import export

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("profile") / "wide.kiln"
    export(Wide().eval(), (torch.randn(128, 256),), path)
    return path


@pytest.fixture
def two_threads():
    before = kiln.num_threads()
    kiln.set_num_threads(2)
    yield
    kiln.set_num_threads(before)


def check_spans(profile) -> None:
    """Instructions lie inside their call, in order, without overlap; chunks inside their instruction."""
    calls = profile.calls
    records = profile.instructions
    assert all(start <= end for start, end in calls)
    by_key = {}
    last_end = {}
    for r in records:
        start, end = calls[r.call]
        assert start <= r.start_ns <= r.end_ns <= end, r
        assert r.start_ns >= last_end.get(r.call, start), "instructions of a call overlap"
        last_end[r.call] = r.end_ns
        by_key[(r.call, r.index)] = r
    for c in profile.chunks:
        r = by_key[(c.call, c.index)]
        assert r.start_ns <= c.start_ns <= c.end_ns <= r.end_ns, (c, r)
        assert 0 <= c.thread < kiln.num_threads()
    assert profile.instruction_ns <= profile.call_ns


def check_trace(text: str, profile) -> dict:
    trace = json.loads(text)
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        assert {"name", "cat", "ts", "dur", "pid", "tid"} <= set(e) and e["dur"] >= 0, e
    cats = {}
    for e in spans:
        cats[e["cat"]] = cats.get(e["cat"], 0) + 1
    assert cats.get("call") == len(profile.calls)
    assert cats.get("chunk", 0) == len(profile.chunks)
    assert sum(n for c, n in cats.items() if c not in ("call", "chunk")) == len(profile.instructions)
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in spans} <= named
    return trace


def test_profile_records_every_instruction(exported):
    path, model, (x,), _ = exported("encoder")
    method = kiln.load(path).method("forward")
    profile = method.profile(x.numpy(), runs=3)
    assert profile.method == "forward" and len(profile.calls) == 3
    infos = method.instructions
    assert [r.index for r in profile.instructions] == list(range(len(infos))) * 3
    for r in profile.instructions:
        assert (r.kind, r.op, r.library, r.tier) == (infos[r.index].kind, infos[r.index].op,
                                                     infos[r.index].library, infos[r.index].tier)
    first = profile.instructions[0]
    assert first.inputs[0] == ("f32", (2, 16, 64)) and first.outputs == (("f32", (2, 16, 64)),)
    assert_close(profile.outputs[0], method(x.numpy())[0], 0.0)
    check_spans(profile)
    check_trace(profile.chrome_trace(), profile)


def test_pool_chunks_are_recorded(wide, two_threads):
    profile = kiln.load(wide).forward.profile(np.ones((128, 256), np.float32), runs=5)
    assert profile.chunks, "no parallel_for chunk was recorded"
    # Which thread runs a chunk is the scheduler's choice (on a loaded machine the calling thread may
    # take them all before the worker wakes): each chunk names one of the pool's two threads.
    threads = {c.thread for c in profile.chunks}
    assert threads and threads <= {0, 1}, threads
    check_spans(profile)
    trace = check_trace(profile.chrome_trace(), profile)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and "tid" in e}
    assert names == {t: {0: "calling thread", 1: "pool worker 1"}[t] for t in threads | {0}}


def test_run_time_shapes_are_recorded(exported):
    path, *_ = exported("mlp_dynamic_batch")
    profile = kiln.load(path).forward.profile(np.ones((7, 32), np.float32))
    assert profile.instructions[0].inputs[0] == ("f32", (7, 32))
    assert profile.instructions[-1].outputs == (("f32", (7, 10)),)


def test_profile_table_names_the_costliest_operators(exported):
    path, *_ = exported("encoder")
    profile = kiln.load(path).forward.profile(np.ones((2, 16, 64), np.float32))
    table = profile.table(top=3)
    lines = table.splitlines()
    assert lines[0] == (f"method 'forward': 1 call, {len(profile.instructions)} instructions per call; "
                        "times are per call")
    assert lines[1].split()[:5] == ["time", "share", "count", "operator", "kernel"]
    rows = lines[2:5]
    assert all(" ms " in row for row in rows)
    assert "more operators)" in lines[5] and "total of the instructions" in lines[6]
    assert "wall time of the call" in lines[7]


def test_profile_errors(exported):
    path, *_ = exported("mlp")
    method = kiln.load(path).forward
    with pytest.raises(kiln.InvalidArgument, match="runs must be a positive int, got 0"):
        method.profile(np.ones((4, 32), np.float32), runs=0)
    with pytest.raises(kiln.InvalidInput, match=r"wrong shape: expected f32\[4, 32\], got f32\[3, 32\]"):
        method.profile(np.ones((3, 32), np.float32))


def kiln_cmd(*args):
    cmd = [sys.executable, "-m", "kiln", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=300)


def test_kiln_profile_prints_a_table_and_writes_a_trace(wide, tmp_path):
    trace = tmp_path / "wide.json"
    proc = kiln_cmd("profile", str(wide), "--runs", "2", "--threads", "2", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"{wide} forward: inputs float32[128, 256] (random, seed 0); 2 thread(s)")
    assert out[1] == "method 'forward': 2 calls, 2 instructions per call; times are per call"
    assert any("total of the instructions" in line for line in out)
    assert any("measured wall time of a call without the profiler (mean of 2" in line for line in out)
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" and e["cat"] == "call" for e in events) == 2
    chunk_threads = {e["tid"] for e in events if e["ph"] == "X" and e["cat"] == "chunk"}
    assert chunk_threads and chunk_threads <= {0, 1}, chunk_threads  # which thread ran which: the scheduler's choice


def test_kiln_profile_trace_default_path(exported, tmp_path):
    path, *_ = exported("mlp")
    proc = subprocess.run([sys.executable, "-m", "kiln", "profile", str(path)], capture_output=True, text=True,
                          env=clean_env(), timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "trace: mlp.trace.json" in proc.stdout
    json.loads((tmp_path / "mlp.trace.json").read_text())


def test_kiln_bench_reports_percentiles(exported):
    path, *_ = exported("mlp")
    proc = kiln_cmd("bench", str(path), "--runs", "30", "--warmup", "3", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"{path} forward: inputs float32[4, 32] (random, seed 0); 1 thread(s), "
                        + lines[0].split("1 thread(s), ")[1])
    assert lines[1] == "3 warm-up calls, 30 timed calls"
    fields = lines[2].split()
    assert fields[0] == "latency"
    values = {fields[i]: float(fields[i + 1]) for i in range(1, len(fields), 3)}
    assert list(values) == ["min", "p50", "p90", "p99", "max", "mean"]
    assert values["min"] <= values["p50"] <= values["p90"] <= values["p99"] <= values["max"]
    assert lines[3].startswith("throughput ") and lines[3].endswith(" calls/s (one call at a time)")


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "argument --runs: expected a positive int, got 0"),
    (["--threads", "x"], "argument --threads: expected a positive int, got 'x'"),
])
def test_kiln_bench_refuses_bad_counts(exported, args, message):
    path, *_ = exported("mlp")
    proc = kiln_cmd("bench", str(path), *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_kiln_bench_with_npy_inputs_and_bad_files(exported, tmp_path):
    path, *_ = exported("mlp")
    np.save(tmp_path / "x.npy", np.ones((4, 32), np.float32))
    proc = kiln_cmd("bench", str(path), str(tmp_path / "x.npy"), "--runs", "5", "--warmup", "0")
    assert proc.returncode == 0 and "(from " in proc.stdout, proc.stderr
    proc = kiln_cmd("bench", str(path), str(tmp_path / "missing.npy"))
    assert proc.returncode == 1 and proc.stderr.startswith("kiln: cannot read input 0 from"), proc.stderr


# --- virtual workers: KILN_SIMULATE_THREADS (docs/profiling.md, "Beyond the machine's cores") ---


class ConvNet(torch.nn.Module):
    """A dense and a depthwise 3x3 convolution and a pointwise one: the conv kernels' partitions."""

    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Conv2d(8, 32, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pointwise = torch.nn.Conv2d(32, 16, 1)

    def forward(self, x):
        return self.pointwise(torch.relu(self.depthwise(torch.relu(self.dense(x)))))


@pytest.fixture(scope="module")
def convnet(tmp_path_factory):
    from kiln.export import export

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("profile") / "convnet.kiln"
    export(ConvNet().eval(), (torch.randn(1, 8, 48, 48),), path)
    return path


def chunks_by_parallel_for(profile) -> dict:
    jobs: dict = {}
    for c in profile.chunks:
        jobs.setdefault((c.call, c.job), []).append(c)
    return jobs


def check_cover_once(profile) -> dict:
    """Every recorded parallel_for's chunks tile its range [0, n) exactly once, within one instruction."""
    jobs = chunks_by_parallel_for(profile)
    for key, chunks in jobs.items():
        assert len({(c.index, c.n) for c in chunks}) == 1, f"parallel_for {key}: chunks of several instructions"
        at = 0
        for c in sorted(chunks, key=lambda c: c.begin):
            assert c.begin == at and c.end > c.begin, f"parallel_for {key}: chunk [{c.begin}, {c.end}) after {at}"
            at = c.end
        assert at == chunks[0].n, f"parallel_for {key}: chunks end at {at} of {chunks[0].n}"
    return jobs


@pytest.mark.parametrize("model", ["wide", "convnet"])
def test_virtual_workers_partition_as_n_threads_and_change_no_result(model, request, monkeypatch):
    path = request.getfixturevalue(model)
    x = np.random.default_rng(1).standard_normal((128, 256) if model == "wide" else (1, 8, 48, 48),
                                                 dtype=np.float32)
    before = kiln.num_threads()
    kiln.set_num_threads(1)
    try:
        method = kiln.load(path).load_method("forward")
        alone = method(x)[0]
        for workers in (3, 8):
            monkeypatch.setenv("KILN_SIMULATE_THREADS", str(workers))
            profile = method.profile(x, runs=2)
            # The partition changes, the arithmetic per output element does not.
            np.testing.assert_array_equal(profile.outputs[0], alone)
            jobs = check_cover_once(profile)
            assert jobs, f"{workers} virtual workers: no parallel_for was split"
            assert {c.thread for c in profile.chunks} == {0}, "virtual workers run on the calling thread"
            sizes = {len(chunks) for chunks in jobs.values()}
            # The real pool has one thread here: more than one chunk per call means the
            # kernels partitioned for the virtual count, and never beyond it.
            assert max(sizes) == workers, f"{workers} virtual workers: chunks per parallel_for {sorted(sizes)}"
            check_spans(profile)
        monkeypatch.delenv("KILN_SIMULATE_THREADS")
        assert not method.profile(x).chunks, "one real thread splits nothing"
    finally:
        kiln.set_num_threads(before)


def test_real_pool_chunks_cover_each_range_once(wide, two_threads):
    x = np.random.default_rng(2).standard_normal((128, 256), dtype=np.float32)
    profile = kiln.load(wide).load_method("forward").profile(x, runs=2)
    jobs = check_cover_once(profile)
    assert jobs and max(len(c) for c in jobs.values()) <= 2


@pytest.mark.parametrize("value", ["0", "-2", "many", "4x", "100000"])
def test_simulate_threads_refuses_a_bad_count(wide, monkeypatch, value):
    method = kiln.load(wide).load_method("forward")
    x = np.zeros((128, 256), dtype=np.float32)
    monkeypatch.setenv("KILN_SIMULATE_THREADS", value)
    with pytest.raises(kiln.InvalidArgument, match="KILN_SIMULATE_THREADS must be a thread count from 1 to 1024"):
        method.profile(x)
    method(x)  # a call without the profiler never reads it
