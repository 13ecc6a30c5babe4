"""examples/cpp/hello built out of tree with only find_package(kiln) gives Python's outputs,
with a RUNPATH that needs no LD_LIBRARY_PATH."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import REPO, build_cmake_project, clean_env

pytestmark = pytest.mark.shared_runtime


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    build = tmp_path_factory.mktemp("hello")
    build_cmake_project(REPO / "examples" / "cpp" / "hello", build,
                        defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build / "hello"


def parse_outputs(stdout: str) -> list:
    values = re.findall(r"^  values (.*)$", stdout, re.M)
    return [np.array([float(v) for v in line.split() if v != "..."]) for line in values]


def test_hello_matches_python(hello, exported, tmp_path):
    path, _, (x,), _ = exported("cnn")
    x.numpy().tofile(tmp_path / "x.bin")
    proc = subprocess.run([str(hello), str(path), "--input", str(tmp_path / "x.bin"), "--all"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "method forward" in proc.stdout
    assert "input  x: f32[2, 3, 32, 32]" in proc.stdout
    (got,) = parse_outputs(proc.stdout)
    (want,) = kiln.load(path).forward(x.numpy())
    np.testing.assert_allclose(got, want.ravel(), rtol=1e-6, atol=1e-6)
    # The registry the app used lives in the wheel's libkiln.so.0.
    assert f"runtime {Path(kiln.library_path()).resolve()}" in proc.stdout or \
        f"runtime {kiln.library_path()}" in proc.stdout


def test_hello_elf_runpath(hello):
    dynamic = subprocess.run(["readelf", "-d", str(hello)], capture_output=True, text=True).stdout
    assert re.search(r"NEEDED.*\[libkiln\.so\.0\]", dynamic)
    runpath = re.search(r"\(RUNPATH\).*\[(.*)\]", dynamic)
    assert runpath and "(RPATH)" not in dynamic
    entries = runpath.group(1).split(":")
    assert "$ORIGIN" in entries and "$ORIGIN/../lib" in entries
    assert kiln.lib_dir() in entries


def test_hello_reports_bad_program(hello, tmp_path):
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(b"\0" * 100)
    proc = subprocess.run([str(hello), str(bad)], capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 1
    assert "invalid_program" in proc.stderr


def test_found_through_site_packages_prefix(tmp_path):
    # Plain CMake with CMAKE_PREFIX_PATH=<site-packages> finds <prefix>/kiln/lib/cmake/kiln.
    site_packages = Path(kiln.__file__).resolve().parent.parent
    build_cmake_project(REPO / "examples" / "cpp" / "hello", tmp_path,
                        defines={"CMAKE_PREFIX_PATH": str(site_packages)})
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert f"kiln_DIR:PATH={site_packages / 'kiln' / 'lib' / 'cmake' / 'kiln'}" in cache


def test_hello_runs_dynamic_sizes_and_keeps_state(hello, exported):
    """The C++ API: a smaller size in a dynamic dim, and state carried across calls."""
    path, *_ = exported("dynamic_state")
    proc = subprocess.run([str(hello), str(path), "--sizes", "2,3,8", "--calls", "3", "--all"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "input  x: f32[2, 12, 8] (dynamic)" in proc.stdout
    assert "state  calls: f32[1]" in proc.stdout and "state  summary: f32[4, 8]" in proc.stdout
    got = parse_outputs(proc.stdout)
    assert len(got) == 6  # two outputs per call
    method = kiln.load(path).load_method("forward")
    x = np.ones((2, 3, 8), np.float32)
    for call in range(3):
        want = method(x)
        assert len(want) == 2
        for g, w in zip(got[2 * call: 2 * call + 2], want):
            np.testing.assert_allclose(g, w.ravel(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(got[0], got[2])  # the call counter moved the outputs


def test_hello_refuses_sizes_beyond_the_bound(hello, exported):
    path, *_ = exported("dynamic_state")
    proc = subprocess.run([str(hello), str(path), "--sizes", "2,13,8"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 1
    assert "invalid_input" in proc.stderr and "got f32[2, 13, 8]" in proc.stderr


def test_hello_profiles_with_the_cpp_api(hello, exported, tmp_path):
    """kiln::Profile from C++: Method::run(inputs, &profile), Profile::table(), Profile::chrome_trace()."""
    path, *_ = exported("cnn")
    trace = tmp_path / "trace.json"
    proc = subprocess.run([str(hello), str(path), "--calls", "2", "--profile", str(trace)],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    method = kiln.load(path).method("forward")
    n = len(method.instructions)
    assert f"method 'forward': 2 calls, {n} instructions per call; times are per call" in proc.stdout
    assert "total of the instructions" in proc.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert sum(e["cat"] == "call" for e in spans) == 2
    assert sum(e["cat"] not in ("call", "chunk") for e in spans) == 2 * n
