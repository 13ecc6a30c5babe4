"""The C API (kiln/c_api.h, docs/c_api.md): examples/c built out of tree against the installed wheel
(find_package(kiln COMPONENTS c) and pkg-config) gives Python's bytes on the default and the
reference kernels; the header of API version 1 kept in tests/c_api/v1 still builds and runs against
this library, and its table layout is a prefix of the current one; a future version is refused with
a message; the C API in a Python process reaches the same registries as Python."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from test_one_runtime import PLUGIN_KERNEL, one_runtime_project, run_python

import kiln

from conftest import REPO, build_cmake_project, clean_env

pytestmark = pytest.mark.shared_runtime

HEADER = Path(kiln.include_dir()) / "kiln" / "c_api.h"
V1 = REPO / "tests" / "c_api" / "v1"
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int64): 2, np.dtype(np.int32): 3,
          np.dtype(np.bool_): 4, np.dtype(np.float16): 5, np.dtype(np.uint8): 7, np.dtype(np.int8): 8}
DTYPE_OF = {code: dtype for dtype, code in DTYPES.items()}


def write_tensors(path: Path, arrays) -> None:
    """The example's tensor file: per tensor uint32 dtype, uint32 ndim, int64 sizes, row-major bytes."""
    with open(path, "wb") as f:
        for a in arrays:
            a = np.ascontiguousarray(a)
            f.write(struct.pack(f"<II{a.ndim}q", DTYPES[a.dtype], a.ndim, *a.shape) + a.tobytes())


def read_tensors(path: Path) -> list:
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        code, ndim = struct.unpack_from("<II", data, at)
        shape = struct.unpack_from(f"<{ndim}q", data, at + 8)
        at += 8 + 8 * ndim
        dtype = DTYPE_OF[code]
        n = int(np.prod(shape)) * dtype.itemsize
        out.append(np.frombuffer(data[at:at + n], dtype).reshape(shape))
        at += n
    return out


def api_members(header: Path, struct: str = "kiln_api") -> list:
    """The function pointers of a table struct in declaration order (after version and struct_size)."""
    body = re.search(rf"typedef struct {struct} \{{(.*?)\}} {struct};", header.read_text(), re.S).group(1)
    return re.findall(r"\(\*(\w+)\)\(", body)


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("c_example")
    build_cmake_project(REPO / "examples" / "c", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build / "kiln_c_example"


@pytest.fixture(scope="module")
def example_v1(tmp_path_factory) -> Path:
    """The same program compiled against the API version 1 header kept in the tests."""
    build = tmp_path_factory.mktemp("c_example_v1")
    build_cmake_project(REPO / "examples" / "c", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(),
                                                                 "KILN_C_INCLUDE": str(V1)})
    return build / "kiln_c_example"


def run_example(binary: Path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          env=env or clean_env(), timeout=120)


def python_outputs(path: Path, inputs, kernels: str = "", calls: int = 1, reset: bool = False) -> list:
    method = kiln.load(path, kernels=kernels).load_method("forward")
    for _ in range(calls):
        if reset:
            method.reset_state()
        outputs = method(*inputs)
    return outputs


def assert_same_bytes(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == np.ascontiguousarray(w).tobytes()


@pytest.fixture(scope="module")
def hello(tmp_path_factory) -> Path:
    """examples/cpp/hello: the same program through the C++ API."""
    build = tmp_path_factory.mktemp("hello")
    build_cmake_project(REPO / "examples" / "cpp" / "hello", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build / "hello"


@pytest.mark.parametrize("kernels", ["", "portable"], ids=["default", "portable"])
def test_c_example_gives_pythons_bytes(example, hello, exported, tmp_path, kernels):
    """The same program from Python, C and C++ (examples/cpp/hello --output): the same bytes (and
    from Rust: test_rust_binding_gives_pythons_bytes)."""
    path, _, (x,), _ = exported("cnn")
    write_tensors(tmp_path / "in.bin", [x.numpy()])
    want = python_outputs(path, [x.numpy()], kernels=kernels)
    write_tensors(tmp_path / "want.bin", want)
    env = clean_env(KILN_KERNELS=kernels) if kernels else None
    proc = run_example(example, path, "--input", tmp_path / "in.bin", "--output", tmp_path / "out.bin",
                       "--expect", tmp_path / "want.bin", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "method forward\n  input  x: f32[2, 3, 32, 32]\n" in proc.stdout
    assert "outputs match the expected file" in proc.stdout
    assert f"runtime {kiln.library_path()}" in proc.stdout or \
        f"runtime {Path(kiln.library_path()).resolve()}" in proc.stdout
    assert_same_bytes(read_tensors(tmp_path / "out.bin"), want)
    x.numpy().tofile(tmp_path / "x.raw")
    proc = run_example(hello, path, "--input", tmp_path / "x.raw", "--output", tmp_path / "cpp.raw", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "cpp.raw").read_bytes() == b"".join(np.ascontiguousarray(w).tobytes() for w in want)


def test_state_reset_caller_buffers_and_bytes(example, exported, tmp_path):
    """Dynamic sizes below the bound, state over three calls, outputs into caller buffers of the
    largest size, a program loaded from a copy of the bytes; then --reset before each call."""
    path, *_ = exported("dynamic_state")
    x = np.linspace(-1, 1, 2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    write_tensors(tmp_path / "in.bin", [x])
    proc = run_example(example, path, "--input", tmp_path / "in.bin", "--output", tmp_path / "out.bin",
                       "--calls", 3, "--caller-outputs", "--from-bytes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  input  x: f32[2, 12 (>= 0), 8]\n  output output_0: f32[2, 2, 24 (>= 0)]\n" in proc.stdout
    assert "  state  calls: f32[1]" in proc.stdout
    third = python_outputs(path, [x], calls=3)
    assert_same_bytes(read_tensors(tmp_path / "out.bin"), third)
    proc = run_example(example, path, "--input", tmp_path / "in.bin", "--output", tmp_path / "reset.bin",
                       "--calls", 3, "--reset")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = python_outputs(path, [x], calls=1)
    assert_same_bytes(read_tensors(tmp_path / "reset.bin"), first)
    assert not np.array_equal(first[0], third[0])  # the state moved the outputs


def test_c_example_reports_errors(example, exported, tmp_path):
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(b"\0" * 100)
    proc = run_example(example, bad)
    assert proc.returncode == 1 and "error: invalid_program: " in proc.stderr, proc.stderr
    path, *_ = exported("dynamic_state")
    write_tensors(tmp_path / "big.bin", [np.zeros((2, 13, 8), np.float32)])
    proc = run_example(example, path, "--input", tmp_path / "big.bin")
    assert proc.returncode == 1 and "error: invalid_input: " in proc.stderr and "[2, 13, 8]" in proc.stderr
    write_tensors(tmp_path / "i32.bin", [np.zeros((2, 3, 8), np.int32)])
    proc = run_example(example, path, "--input", tmp_path / "i32.bin")
    assert proc.returncode == 1 and "error: invalid_input: " in proc.stderr and "i32" in proc.stderr
    proc = run_example(example, path, "--kernels", "fastest")
    assert proc.returncode == 1 and "fastest" in proc.stderr, proc.stderr


@pytest.mark.parametrize("std", ["c99", "c11", "c17"])
def test_c_headers_compile_as_plain_c(std, tmp_path):
    """kiln/c_api.h and kiln/llm/c_api.h as installed: plain C, no warnings with -pedantic."""
    src = tmp_path / "headers.c"
    src.write_text("#include <kiln/c_api.h>\n#include <kiln/llm/c_api.h>\nint main(void) { return 0; }\n")
    proc = subprocess.run(["cc", f"-std={std}", "-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only",
                           f"-I{kiln.include_dir()}", str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_future_api_version_is_refused_clearly(example):
    proc = run_example(example, "unused.kiln", "--api-version", 2)
    assert proc.returncode == 2
    assert (f"this libkiln.so.0 (kiln {kiln.__version__}) serves kiln C API versions 1 to 1, and version 2 was "
            "asked for") in proc.stderr, proc.stderr
    proc = run_example(example, "unused.kiln", "--api-version", 0)
    assert proc.returncode == 2 and "version 0 does not exist" in proc.stderr, proc.stderr


def test_the_v1_header_builds_and_runs_against_this_library(example_v1, exported, tmp_path):
    path, _, (x,), _ = exported("mlp")
    write_tensors(tmp_path / "in.bin", [x.numpy()])
    write_tensors(tmp_path / "want.bin", python_outputs(path, [x.numpy()]))
    proc = run_example(example_v1, path, "--input", tmp_path / "in.bin", "--expect", tmp_path / "want.bin")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    current = api_version(HEADER)
    assert f"C API {current} (table {current}, asked for 1)" in proc.stdout
    assert "outputs match the expected file" in proc.stdout


def api_version(header: Path) -> int:
    return int(re.search(r"#define KILN_C_API_VERSION (\d+)", header.read_text()).group(1))


def test_the_table_only_grows(tmp_path):
    """Every member of the version 1 table sits at the same offset, with the same declaration, in the
    installed header, and the library fills every entry of its table: compiled, not only parsed."""
    old, new = api_members(V1 / "kiln" / "c_api.h"), api_members(HEADER)
    assert old and new[:len(old)] == old, "the kiln_api table may only grow at its end (docs/c_api.md)"
    declaration = re.compile(r"^\s*(.*\(\*\w+\)\(.*?\);)", re.M | re.S)
    decls = [" ".join(d.split()) for d in declaration.findall(
        re.search(r"typedef struct kiln_api \{(.*?)\} kiln_api;", (V1 / "kiln" / "c_api.h").read_text(), re.S)
        .group(1))]
    current = " ".join(HEADER.read_text().split())
    assert all(d in current for d in decls), [d for d in decls if d not in current]
    lines = "\n".join(f'  printf("{m} %zu\\n", offsetof(kiln_api, {m}));' for m in old)
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <kiln/c_api.h>\n"
                   "int main(void) {\n" + lines + "\n  return 0;\n}\n")
    offsets = []
    for include in (V1, Path(kiln.include_dir())):
        exe = tmp_path / f"layout_{len(offsets)}"
        subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{include}", str(src), "-o", str(exe)],
                       check=True, capture_output=True)
        offsets.append(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
    assert offsets[0] == offsets[1]
    assert len(offsets[0].splitlines()) == len(old)


def test_c_api_in_python_sees_the_same_registries(tmp_path_factory):
    """One process: Python's kiln and the C API (through ctypes on the same libkiln.so.0) count the
    same kernels; a plugin loaded through the C API is then registered for Python too, and the
    process still has one runtime."""
    plugin = one_runtime_project(tmp_path_factory) / "libone_runtime_plugin.so"
    members = api_members(HEADER)
    proc = run_python(f"""
        import ctypes
        import kiln
        lib = ctypes.CDLL(kiln.library_path())
        lib.kiln_get_api_base.restype = ctypes.POINTER(ctypes.c_uint32 * 2)
        base = lib.kiln_get_api_base()
        get_api = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)(
            ctypes.cast(base, ctypes.POINTER(ctypes.c_void_p))[1])
        table = ctypes.cast(get_api(1, None), ctypes.POINTER(ctypes.c_void_p))
        members = {members!r}
        def fn(name, *argtypes):
            # after two uint32 fields, one pointer per member
            return ctypes.CFUNCTYPE(ctypes.c_void_p, *argtypes)(table[1 + members.index(name)])
        count = fn("registered_kernel_count", ctypes.POINTER(ctypes.c_size_t))
        n = ctypes.c_size_t()
        assert count(ctypes.byref(n)) is None
        assert n.value == len(kiln.registered_kernels()), (n.value, len(kiln.registered_kernels()))
        kernels, backends = ctypes.c_size_t(), ctypes.c_size_t()
        load = fn("load_library", ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
        assert load({str(plugin).encode()!r}, ctypes.byref(kernels), ctypes.byref(backends)) is None
        assert (kernels.value, backends.value) == (1, 1)
        assert {PLUGIN_KERNEL!r} in {{k.op_name for k in kiln.registered_kernels()}}
        assert count(ctypes.byref(n)) is None and n.value == len(kiln.registered_kernels())
        assert len(kiln.runtime_copies()) == 1, kiln.runtime_copies()
        print("same registries", n.value)
    """)
    assert "same registries" in proc.stdout


def test_a_c_program_embedding_python_sees_one_registry(tmp_path_factory, tmp_path):
    """The same from the other side: a C program (tests/c_api/embed_python.c) loads a plugin through
    the C API, then the interpreter it embeds imports kiln and counts the same kernels, the plugin's
    among them, in one runtime."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed (built without --enable-shared)")
    plugin = one_runtime_project(tmp_path_factory) / "libone_runtime_plugin.so"
    lib_dir, py_lib_dir = Path(kiln.library_path()).parent, sysconfig.get_config_var("LIBDIR")
    binary = tmp_path / "embed_python"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", str(REPO / "tests" / "c_api" / "embed_python.c"),
                    f"-I{kiln.include_dir()}", f"-I{sysconfig.get_paths()['include']}", f"-L{lib_dir}",
                    "-l:libkiln.so.0", f"-Wl,-rpath,{lib_dir}", f"-L{py_lib_dir}",
                    f"-lpython{sysconfig.get_python_version()}", f"-Wl,-rpath,{py_lib_dir}", "-o", str(binary)],
                   check=True)
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    env = {**clean_env(), "PYTHONHOME": sys.base_prefix, "PYTHONPATH": os.pathsep.join(sorted(paths))}
    proc = subprocess.run([str(binary), str(plugin), PLUGIN_KERNEL], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Python:" in proc.stdout and "one runtime" in proc.stdout, proc.stdout


def test_pkg_config_builds_the_c_example(exported, tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is not installed (apt-get install pkg-config)")
    env = clean_env(PKG_CONFIG_PATH=kiln.pkgconfig_dir())
    subprocess.run(["make", "-C", str(REPO / "tests" / "cpp" / "pkgconfig"), f"OUT={tmp_path}", "c"],
                   env=env, check=True, capture_output=True)
    path, *_ = exported("mlp")
    proc = run_example(tmp_path / "kiln_c_example", path)
    assert proc.returncode == 0, proc.stderr
    assert "method forward\n  input  x: f32[4, 32]\n" in proc.stdout


RUST = REPO / "bindings" / "rust"


@pytest.mark.parametrize("rust_file, struct, header", [("ffi.rs", "kiln_api", "c_api.h"),
                                                       ("llm.rs", "kiln_llm_api", "llm/c_api.h")])
def test_rust_declarations_follow_the_header(rust_file, struct, header):
    """bindings/rust declares the tables by hand (no bindgen): the same members in the same order."""
    body = re.search(rf"pub struct {struct} \{{(.*?)\n\}}", (RUST / "src" / rust_file).read_text(), re.S).group(1)
    fields = re.findall(r"pub (\w+):", body)
    assert fields[:2] == ["version", "struct_size"]
    assert fields[2:] == api_members(Path(kiln.include_dir()) / "kiln" / header, struct)


@pytest.mark.parametrize("kernels", ["", "portable"], ids=["default", "portable"])
def test_rust_binding_gives_pythons_bytes(exported, tmp_path, kernels):
    """`cargo test --offline` of bindings/rust (std only), linked with the libkiln.so.0 that `kiln --libs`
    names, runs the program Python ran and compares the bytes (bindings/rust/tests/run_program.rs)."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed: the Rust binding is not built here")
    path, _, (x,), _ = exported("cnn")
    write_tensors(tmp_path / "in.bin", [x.numpy()])
    write_tensors(tmp_path / "want.bin", python_outputs(path, [x.numpy()], kernels=kernels))
    scripts = Path(sysconfig.get_path("scripts"))
    env = clean_env(PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
                    CARGO_TARGET_DIR=str(REPO / "build" / "cargo"),  # kept: a rerun only relinks
                    KILN_TEST_PROGRAM=str(path), KILN_TEST_INPUT=str(tmp_path / "in.bin"),
                    KILN_TEST_EXPECTED=str(tmp_path / "want.bin"), **({"KILN_KERNELS": kernels} if kernels else {}))
    env.pop("KILN_LIB_DIR", None)
    proc = subprocess.run([cargo, "test", "--offline", "--manifest-path", str(RUST / "Cargo.toml")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # The test program links the wheel's runtime, found through RUNPATH (no LD_LIBRARY_PATH here).
    binary = re.search(r"Running tests/run_program\.rs \((.*?)\)", proc.stderr).group(1)
    dynamic = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    assert re.search(r"NEEDED.*\[libkiln\.so\.0\]", dynamic)
    assert str(Path(kiln.lib_dir()).resolve()) in re.search(r"\(RUNPATH\).*\[(.*)\]", dynamic).group(1)
    assert "test runs_a_program_with_pythons_bytes ... ok" in proc.stdout
    assert "test result: ok. 3 passed" in proc.stdout


def test_bad_input_gives_statuses(exported, tmp_path):
    """tests/cpp/c_api_bad_input.c compiled as C99 against the installed wheel (the caller instrumented
    with ASan and UBSan; tests/test_sanitizers.py runs it with the runtime instrumented too)."""
    exe = tmp_path / "c_api_bad_input"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-g",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", f"-I{kiln.include_dir()}",
                    str(REPO / "tests" / "cpp" / "c_api_bad_input.c"), "-o", str(exe), kiln.library_path(),
                    f"-Wl,-rpath,{kiln.lib_dir()}"], check=True, capture_output=True)
    for name in ("mlp", "dynamic_state"):
        proc = run_example(exe, exported(name)[0], 100,
                           env=clean_env(ASAN_OPTIONS="detect_leaks=1:exitcode=70", UBSAN_OPTIONS="halt_on_error=1"))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "100 corrupted copies: " in proc.stdout and ", 0 unexpected" in proc.stdout, proc.stdout


@pytest.fixture(scope="module")
def llm_example(tmp_path_factory) -> Path:
    """examples/c/kiln_llm_c_example.c built as C99 with `pkg-config --cflags --libs kiln-llm`."""
    build = tmp_path_factory.mktemp("llm_c_example")
    subprocess.run(["make", "-C", str(REPO / "tests" / "cpp" / "pkgconfig"), f"OUT={build}", "llm_c"],
                   env=clean_env(PKG_CONFIG_PATH=kiln.pkgconfig_dir()), check=True, capture_output=True)
    return build / "kiln_llm_c_example"


def test_llm_c_api_streams_pythons_text(llm_example, llm_programs):
    """The LLM runner's C API (kiln/llm/c_api.h): greedy text equal to Python's Runner, streamed piece
    by piece; stats; the tokenizer's encode and decode; cancellation from the callback."""
    from kiln.llm import Runner

    tiny = llm_programs("tiny")
    runner = Runner(tiny)
    want = runner.generate("The sea is", max_new_tokens=12, temperature=0)
    proc = run_example(llm_example, tiny, "--prompt", "The sea is", "--max-new-tokens", 12, "--temperature", 0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text, stats = proc.stdout.split("\n--- stats: ", 1)
    assert text == want
    generated = runner.stats.generated_tokens
    assert stats.startswith(f"{runner.stats.prompt_tokens} prompt tokens, {generated} generated, "
                            f"finish {runner.stats.finish_reason}, {len(want.encode())} bytes of text\n"), stats
    ids = re.search(r"--- prompt ids: ([\d ]+)\n", stats).group(1).split()
    assert len(ids) >= 3 and "--- decoded: The sea is\n" in stats
    proc = run_example(llm_example, tiny, "--prompt", "The sea is", "--max-new-tokens", 12, "--temperature", 0,
                       "--cancel-after", 3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text, stats = proc.stdout.split("\n--- stats: ", 1)
    assert "finish cancelled" in stats and want.startswith(text) and len(text) < len(want)


def test_rust_llm_runner_streams_pythons_text(llm_programs, tmp_path):
    """bindings/rust with its `llm` feature (kiln::llm::Runner over kiln/llm/c_api.h): Python's greedy
    text, streamed through a closure; encode/decode; a closure that returns false cancels."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed: the Rust binding is not built here")
    from kiln.llm import Runner

    tiny = llm_programs("tiny")
    (tmp_path / "want.txt").write_text(Runner(tiny).generate("The sea is", max_new_tokens=12, temperature=0))
    scripts = Path(sysconfig.get_path("scripts"))
    env = clean_env(PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
                    CARGO_TARGET_DIR=str(REPO / "build" / "cargo"), KILN_TEST_LLM_PROGRAM=str(tiny),
                    KILN_TEST_LLM_PROMPT="The sea is", KILN_TEST_LLM_EXPECTED=str(tmp_path / "want.txt"))
    proc = subprocess.run([cargo, "test", "--offline", "--features", "llm", "--test", "llm",
                           "--manifest-path", str(RUST / "Cargo.toml")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "test streams_pythons_greedy_text ... ok" in proc.stdout


def test_llm_c_api_refuses_a_future_version_and_a_program_without_an_llm(llm_example, exported):
    proc = run_example(llm_example, "unused.kiln", "--prompt", "x", "--api-version", 2)
    assert proc.returncode == 2
    assert "serves kiln LLM C API versions 1 to 1, and version 2 was asked for" in proc.stderr, proc.stderr
    proc = run_example(llm_example, exported("mlp")[0], "--prompt", "x")
    assert proc.returncode == 1 and "error: invalid_program: " in proc.stderr, proc.stderr


def test_threads_share_a_method_and_keep_their_own_errors(exported, tmp_path):
    """tests/cpp/threads/c_api_threads.c compiled as C99 against the wheel: one kiln_method, four
    threads, each its own results and its own error messages (tests/test_sanitizers.py runs it
    under ThreadSanitizer)."""
    exe = tmp_path / "c_api_threads"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-pthread",
                    f"-I{kiln.include_dir()}", str(REPO / "tests" / "cpp" / "threads" / "c_api_threads.c"),
                    "-o", str(exe), kiln.library_path(), f"-Wl,-rpath,{kiln.lib_dir()}"],
                   check=True, capture_output=True)
    for name in ("mlp", "cnn"):
        proc = run_example(exe, exported(name)[0], 50)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "200 calls, 0 mismatches, 0 errors" in proc.stdout
