"""examples/cpp/llm, built out of tree with only find_package(kiln REQUIRED COMPONENTS llm)
(or pkg-config kiln-llm), generates from a .kiln file what the Python runner generates,
float32 and the export's default quantized weights alike; libkiln_llm.so.0 uses the one
runtime (docs/architecture.md) and brings libkiln_quantized.so.0; a kiln::runtime application given a
quantized program is told which library to link."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kiln
from kiln.llm import Runner

from conftest import REPO, build_cmake_project, clean_env

pytestmark = pytest.mark.shared_runtime

PACKAGE = Path(kiln.__file__).resolve().parent


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    build = tmp_path_factory.mktemp("llm_example")
    build_cmake_project(REPO / "examples" / "cpp" / "llm", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build / "llm"


def run(app, *args):
    return subprocess.run([str(app), *map(str, args)], capture_output=True, text=True, env=clean_env(), timeout=600)


def test_generates_what_python_generates(app, llm_programs):
    tiny = llm_programs("tiny")
    want = Runner(tiny).generate("The sea is", max_new_tokens=12, temperature=0)
    proc = run(app, tiny, "--prompt", "The sea is", "--max-new-tokens", 12, "--temperature", 0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == want + "\n"
    assert "finish max_new_tokens" in proc.stderr
    assert re.search(r"^prefill [0-9.]+ tok/s$", proc.stderr, re.M)
    assert re.search(r"^decode [0-9.]+ tok/s$", proc.stderr, re.M)
    # The registry it used is the wheel's runtime.
    assert (f"runtime {Path(kiln.library_path()).resolve()}" in proc.stderr
            or f"runtime {kiln.library_path()}" in proc.stderr)


def test_batch_generates_what_python_generates_for_each(app, llm_programs):
    """kiln::llm::BatchRunner from C++: 4 sampled answers at once, each the Runner's with its seed."""
    tiny = llm_programs("tiny")
    runner = Runner(tiny)
    want = [runner.generate("The sea is", max_new_tokens=10, temperature=0.9, seed=7 + i) for i in range(4)]
    proc = run(app, tiny, "--prompt", "The sea is", "--max-new-tokens", 10, "--temperature", 0.9, "--seed", 7,
               "--batch", 4)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "".join(f"[{i}] {w}\n" for i, w in enumerate(want))
    assert len(set(want)) > 1  # the seeds differ, so do the answers


def test_the_default_quantized_export_runs(app, llm_programs):
    """`kiln llm export` keeps the GGUF's 4-bit blocks by default: kiln::llm must bring their kernels."""
    program = llm_programs("tiny_gguf")
    want = Runner(program).generate("The sea is", max_new_tokens=12, temperature=0)
    proc = run(app, program, "--prompt", "The sea is", "--max-new-tokens", 12, "--temperature", 0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == want + "\n" and "weights gguf " in proc.stderr


def test_pkg_config_llm_consumer(llm_programs, tmp_path):
    """The same program built by a Makefile from `pkg-config --cflags --libs kiln-llm` alone."""
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is not installed (apt-get install pkg-config)")
    env = clean_env(PKG_CONFIG_PATH=kiln.pkgconfig_dir())
    pcdir = Path(kiln.pkgconfig_dir())
    assert (pcdir / "kiln-llm.pc").is_file() and (pcdir / "kiln-quantized.pc").is_file()
    for pc in ("kiln-llm", "kiln-quantized"):
        libs = subprocess.run(["pkg-config", "--libs", pc], env=env, capture_output=True, text=True, check=True).stdout
        assert f"/lib{pc.replace('-', '_')}.so.0" in libs and "libkiln.so.0" in libs, libs
    proc = subprocess.run(["make", "-C", str(REPO / "tests" / "cpp" / "pkgconfig"), f"OUT={tmp_path}", "llm"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    program = llm_programs("tiny_gguf")
    want = Runner(program).generate("The sea is", max_new_tokens=8, temperature=0)
    proc = run(tmp_path / "llm", program, "--prompt", "The sea is", "--max-new-tokens", 8, "--temperature", 0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == want + "\n"


def test_a_runtime_only_app_is_told_which_library_to_link(llm_programs, tmp_path_factory):
    build = tmp_path_factory.mktemp("hello")
    build_cmake_project(REPO / "examples" / "cpp" / "hello", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    proc = run(build / "hello", llm_programs("tiny_gguf"))
    assert proc.returncode != 0
    assert "kiln_quantized::" in proc.stderr and "link kiln::quantized (libkiln_quantized.so.0" in proc.stderr, \
        proc.stderr


def test_chat_with_the_whole_model(app, llm_programs):
    proc = run(app, llm_programs("smollm2"), "--prompt", "What is the capital of France?", "--chat",
               "--temperature", 0)
    assert proc.returncode == 0, proc.stderr
    assert "Paris" in proc.stdout and "finish stop_token" in proc.stderr


def test_the_callback_cancels(app, llm_programs):
    proc = run(app, llm_programs("tiny"), "--prompt", "The sea is", "--max-new-tokens", 30, "--temperature", 0,
               "--cancel-after", 2)
    assert proc.returncode == 0, proc.stderr
    assert "finish cancelled" in proc.stderr


def test_errors_are_reported(app, llm_programs, exported, tmp_path):
    path, *_ = exported("cnn")
    proc = run(app, path)
    assert proc.returncode == 1 and "invalid_program" in proc.stderr and "not an LLM program" in proc.stderr
    proc = run(app, llm_programs("tiny"), "--prompt", "")
    assert proc.returncode == 1 and "invalid_argument: the prompt is empty" in proc.stderr


def test_links_the_llm_library_and_the_runtime(app):
    dynamic = subprocess.run(["readelf", "-d", str(app)], capture_output=True, text=True).stdout
    needed = re.findall(r"NEEDED.*\[(.*)\]", dynamic)
    assert "libkiln_llm.so.0" in needed and "libkiln.so.0" in needed
    runpath = re.search(r"\(RUNPATH\).*\[(.*)\]", dynamic)
    assert runpath and "(RPATH)" not in dynamic and kiln.lib_dir() in runpath.group(1).split(":")


def test_one_runtime_over_the_llm_library():
    spec = importlib.util.spec_from_file_location("check_single_runtime", REPO / "tools" / "check_single_runtime.py")
    checker = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = checker
    spec.loader.exec_module(checker)
    report = checker.check(PACKAGE)
    assert report.ok, report.text()
    (llm,) = [r for r in report.files if r.path.name == "libkiln_llm.so.0"]
    assert not llm.defined and not llm.has_note  # no copy of the runtime's process-wide state
    dynamic = subprocess.run(["readelf", "-d", str(llm.path)], capture_output=True, text=True).stdout
    assert re.findall(r"NEEDED.*\[(.*)\]", dynamic)[0] == "libkiln.so.0"
    assert re.search(r"\(RUNPATH\).*\[\$ORIGIN\]", dynamic)
    # The Python extension links it (the SPEC: extensions are linked by the Python extension).
    ext = next(PACKAGE.glob("_kiln*.so"))
    assert "libkiln_llm.so.0" in subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True).stdout
