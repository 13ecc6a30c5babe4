"""The C++ SDK inside the installed package: files, exported symbols, a RUNPATH that needs no
LD_LIBRARY_PATH, pkg-config (docs/architecture.md)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import kiln

from conftest import REPO, clean_env

pytestmark = pytest.mark.shared_runtime

ROOT = Path(kiln.__file__).resolve().parent
LIB = ROOT / "lib"


def test_lib_dir_holds_exactly_the_sdk_files():
    files = sorted(str(p.relative_to(LIB)) for p in LIB.rglob("*") if p.is_file() or p.is_symlink())
    assert files == [
        "cmake/kiln/kiln-runpath.rsp",
        "cmake/kiln/kilnConfig.cmake",
        "cmake/kiln/kilnConfigVersion.cmake",
        "cmake/kiln/kilnPlugin.cmake",
        "libkiln.so.0",
        "libkiln_llm.so.0",
        "libkiln_quantized.so.0",
        "pkgconfig/kiln-llm.pc",
        "pkgconfig/kiln-quantized.pc",
        "pkgconfig/kiln.pc",
    ]


def test_no_symlinks_and_one_runtime():
    assert not [p for p in ROOT.rglob("*") if p.is_symlink()]
    # The runtime and the extension libraries, each one real file.
    assert sorted(p.name for p in ROOT.rglob("libkiln*")) == ["libkiln.so.0", "libkiln_llm.so.0",
                                                               "libkiln_quantized.so.0"]


def test_headers_are_public_only():
    include = ROOT / "include" / "kiln"
    headers = sorted(str(p.relative_to(include)) for p in include.rglob("*") if p.is_file())
    assert "kiln.h" in headers and "llm.h" in headers and all(h.endswith(".h") for h in headers)
    text = "".join((include / h).read_text() for h in headers)
    assert "flatbuffers" not in text and "nanobind" not in text and "_generated.h" not in text


def test_each_header_compiles_alone(tmp_path):
    # One test over the installed headers, not a parametrization over them: with no
    # headers installed that would be an empty parameter set, which pytest skips.
    include = ROOT / "include" / "kiln"
    headers = sorted(str(p.relative_to(include)) for p in include.rglob("*.h"))
    assert "kiln.h" in headers and "llm/runner.h" in headers
    failures = {}
    for header in headers:
        src = tmp_path / "one.cpp"
        src.write_text(f"#include <kiln/{header}>\nint main() {{ return 0; }}\n")
        proc = subprocess.run(["c++", "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", f"-I{ROOT / 'include'}",
                               str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            failures[header] = proc.stderr
    assert failures == {}


def test_runtime_soname_and_exports():
    dynamic = subprocess.run(["readelf", "-d", str(LIB / "libkiln.so.0")], capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"SONAME.*\[libkiln\.so\.0\]", dynamic)
    symbols = subprocess.run(["nm", "-DC", "--defined-only", str(LIB / "libkiln.so.0")],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    names = [line.split(" ", 2)[2].split("@")[0] for line in symbols if line.strip()]
    assert len(names) > 20
    # The public API (KILN_0), the kernel helpers of the project's extensions (KILN_INTERNAL_0,
    # kiln::kernels::, docs/architecture.md "One GEMM") and the C API's one entry point (KILN_C_1,
    # docs/c_api.md).
    allowed = re.compile(r"^(kiln::|KILN_0$|KILN_INTERNAL_0$|KILN_C_1$|kiln_get_api_base$)")
    leaked = [n for n in names if not allowed.match(n)]
    assert leaked == [], leaked
    c_symbols = [line.split(" ", 2)[2] for line in symbols if "KILN_C_1" in line]
    assert sorted(c_symbols) == ["KILN_C_1", "kiln_get_api_base@@KILN_C_1"], c_symbols
    assert any(n.startswith("kiln::register_kernel(") for n in names)
    internal = [line for line in symbols if "@@KILN_INTERNAL_0" in line]
    # KILN_INTERNAL_0 also holds the C API's status constructor for the extensions' own C tables.
    assert internal and all(line.split(" ", 2)[2].startswith(("kiln::kernels::", "kiln::c_internal::"))
                            for line in internal), internal


def test_llm_library_exports():
    """libkiln_llm.so.0 (extensions/llm/llm.map): kiln::llm's C++ API and the LLM C API's one entry
    point in a node of its own, nothing of the standard library."""
    symbols = subprocess.run(["nm", "-DC", "--defined-only", str(LIB / "libkiln_llm.so.0")],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    names = [line.split(" ", 2)[2] for line in symbols if line.strip()]
    assert any(n.startswith("kiln::llm::Runner::") for n in names)
    allowed = re.compile(r"^((typeinfo for |typeinfo name for |vtable for )?kiln::|KILN_LLM_0$|KILN_LLM_C_1$)")
    leaked = [n for n in names if not allowed.match(n) and "@@KILN_LLM_C_1" not in n]
    assert leaked == [], leaked[:20]
    c_symbols = [n for n in names if "KILN_LLM_C_1" in n]
    assert sorted(c_symbols) == ["KILN_LLM_C_1", "kiln_llm_get_api@@KILN_LLM_C_1"], c_symbols


def test_extension_links_the_shared_runtime():
    ext = next(ROOT.glob("_kiln*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"NEEDED.*\[libkiln\.so\.0\]", dynamic)
    assert re.search(r"RUNPATH.*\[\$ORIGIN/lib\]", dynamic)
    # It defines none of the runtime's API itself.
    defined = subprocess.run(["nm", "-DC", "--defined-only", str(ext)], capture_output=True, text=True).stdout
    assert "kiln::register_kernel" not in defined


def test_no_build_paths_in_the_package():
    markers = [str(REPO / "build").encode(), b"/tmp/pip-", b"/tmp/tmp"]
    offenders = []
    for p in ROOT.rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            data = p.read_bytes()
            offenders += [f"{p}: {m.decode()}" for m in markers if m in data]
    assert offenders == []


def test_pkg_config_consumer(tmp_path, exported):
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is not installed (apt-get install pkg-config)")
    env = clean_env(PKG_CONFIG_PATH=kiln.pkgconfig_dir())
    cflags = subprocess.run(["pkg-config", "--cflags", "kiln"], env=env, capture_output=True, text=True, check=True)
    include_dirs = [Path(flag[2:]).resolve() for flag in cflags.stdout.split() if flag.startswith("-I")]
    assert include_dirs == [ROOT / "include"], cflags.stdout
    subprocess.run(["make", "-C", str(REPO / "tests" / "cpp" / "pkgconfig"), f"OUT={tmp_path}"],
                   env=env, check=True, capture_output=True)
    path, *_ = exported("mlp")
    proc = subprocess.run([str(tmp_path / "hello"), str(path)], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "method forward" in proc.stdout
