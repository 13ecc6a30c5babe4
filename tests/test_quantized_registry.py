"""The quantized extension library in the shared runtime: libkiln_quantized.so.0 registers its
kernels once, into the one registry of libkiln.so.0, whether Python or a C++ program loads it.

Split from test_quantized.py, which the static pass runs (scripts/test.sh); these need the
shared build and stay in the shared pass.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kiln

from conftest import REPO, build_cmake_project, clean_env

QUANTIZED_OPS = ("kiln_quantized::linear.default", "kiln_quantized::embedding.default")


def _quantized_kernels():
    return [(k.op_name, k.dtypes, k.tier, k.library) for k in kiln.registered_kernels()
            if k.op_name.startswith("kiln_quantized::")]


@pytest.mark.shared_runtime
def test_import_kiln_registers_the_quantized_kernels_once():
    kernels = _quantized_kernels()
    keys = [(op, dtypes, tier) for op, dtypes, tier, _ in kernels]
    assert len(keys) == len(set(keys))
    assert {op for op, *_ in kernels} == set(QUANTIZED_OPS)
    assert {tier for _, _, tier, _ in kernels} == {0, 100}
    (library,) = {lib for *_, lib in kernels}
    assert Path(library).name == "libkiln_quantized.so.0"
    assert Path(library).resolve().parent == Path(kiln.runtime_library_path()).resolve().parent
    # Loading it again (from Python, or by a C++ library that links it) registers nothing twice.
    failures = len(kiln.registration_failures())
    kiln.load_library(library)
    import ctypes

    ctypes.CDLL(library)
    assert _quantized_kernels() == kernels
    assert len(kiln.registration_failures()) == failures


@pytest.mark.shared_runtime
def test_ownership_checker_passes_over_the_quantized_library():
    from test_one_runtime import PACKAGE, checker

    report = checker.check(PACKAGE)
    assert report.ok, report.text()
    (lib,) = [r for r in report.files if r.path.name == "libkiln_quantized.so.0"]
    assert not lib.defined and not lib.has_note
    assert "kiln::register_kernel" in lib.undefined, lib.undefined


@pytest.mark.shared_runtime
def test_cpp_program_linking_quantized_and_embedding_python_sees_one_registry(tmp_path):
    from test_one_runtime import python_embed_flags

    cflags, ldflags = python_embed_flags()
    build = tmp_path / "build"
    build_cmake_project(REPO / "tests" / "cpp" / "quantized_registry", build, defines={
        "CMAKE_PREFIX_PATH": kiln.cmake_dir(), "KILN_TEST_PYTHON_CFLAGS": cflags, "KILN_TEST_PYTHON_LDFLAGS": ldflags})
    site = str(Path(kiln.__file__).resolve().parent.parent)
    proc = subprocess.run([str(build / "quantized_registry"), site, sys.executable], capture_output=True, text=True,
                          env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    cpp = sorted(line.split(" ", 2)[2] for line in lines if line.startswith("CPP kernel "))
    after = sorted(line.split(" ", 3)[3] for line in lines if line.startswith("CPP after kernel "))
    py = sorted(line.split(" ", 2)[2] for line in lines if line.startswith("PY kernel "))
    assert cpp and cpp == py == after, proc.stdout
    assert len(set(cpp)) == len(cpp)
    (library,) = {Path(line.split()[-1]).resolve() for line in cpp}
    assert library == (Path(kiln.runtime_library_path()).parent / "libkiln_quantized.so.0").resolve(), cpp
    assert "PY failures 0" in lines and "CPP copies 1" in lines and "PY copies 1" in lines, proc.stdout
