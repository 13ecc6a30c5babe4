"""The process-wide registries: introspection, plugins, collisions, ABI checks (docs/extending.md).

The plugins are real shared libraries built here with only find_package(kiln).
Each test that loads plugins runs in a fresh subprocess: a loaded library
cannot be unloaded, so sharing a process would make the tests order-dependent.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kiln

from conftest import STATIC_RUNTIME, clean_env
from program_builder import backend_program, single_op_program


def run_python(code: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_portable_kernels_are_registered_by_the_runtime():
    kernels = kiln.registered_kernels()
    ops = {k.op_name for k in kernels}
    for op in ("aten::linear.default", "aten::conv2d.default", "aten::_softmax.default", "aten::embedding.default"):
        assert op in ops
    runtime = kiln.runtime_library_path()
    # The registry lives in libkiln.so.0, or in the extension itself in a static build.
    expected = kiln._kiln.__file__ if STATIC_RUNTIME else str(Path(kiln.__file__).parent / "lib" / "libkiln.so.0")
    assert Path(runtime).resolve() == Path(expected).resolve()
    # The aten kernels come from the runtime; the quantized extension (linked by the Python module)
    # registers its own namespace only, into the same registry.
    assert {k.library for k in kernels if k.op_name.startswith("aten::")} == {runtime}
    extension = {k.library for k in kernels if k.op_name.startswith("kiln_quantized::")}
    assert extension == ({runtime} if STATIC_RUNTIME else {str(Path(runtime).parent / "libkiln_quantized.so.0")})
    assert kiln.registration_failures() == []


def test_unknown_operator_fails_at_method_load(tmp_path):
    single_op_program(tmp_path / "p.kiln", "kiln_test::does_not_exist")
    program = kiln.load(tmp_path / "p.kiln")
    with pytest.raises(kiln.MissingKernel,
                       match=r"no kernel for kiln_test::does_not_exist.default with dtypes \(f32\); "
                             r"no kernel is registered for this operator"):
        program.method("forward")


def test_missing_backend_fails_at_method_load(tmp_path):
    backend_program(tmp_path / "p.kiln", backend="nobody_registered_this")
    with pytest.raises(kiln.MissingBackend, match="no backend named 'nobody_registered_this'"):
        kiln.load(tmp_path / "p.kiln").method("forward")


@pytest.mark.shared_runtime
def test_backend_collision_keeps_the_first(plugins, tmp_path):
    backend_program(tmp_path / "echo.kiln", scale=3.0)
    proc = run_python(f"""
        import numpy as np, kiln
        first = kiln.load_library({str(plugins / 'libecho_plus_one.so')!r})
        assert [b.name for b in first.backends] == ["test_echo"], first
        try:
            kiln.load_library({str(plugins / 'libecho_plus_two.so')!r})
        except kiln.RegistrationError as e:
            print("ERROR:", e)
        else:
            raise SystemExit("the colliding backend was accepted")
        (name, library), = [(b.name, b.library) for b in kiln.registered_backends()]
        print("OWNER:", name, library)
        (y,) = kiln.load({str(tmp_path / 'echo.kiln')!r}).forward(np.array([0, 1, 2, 3], dtype=np.float32))
        print("RESULT:", y.tolist())
        print("FAILURES:", [(f.what, f.error) for f in kiln.registration_failures()])
    """)
    out = proc.stdout
    error = next(l for l in out.splitlines() if l.startswith("ERROR:"))
    assert "backend 'test_echo'" in error
    assert "libecho_plus_two.so" in error and "libecho_plus_one.so" in error  # both libraries named
    assert "OWNER: test_echo" in out and out.split("OWNER: test_echo ")[1].split()[0].endswith("libecho_plus_one.so")
    assert "RESULT: [1.0, 4.0, 7.0, 10.0]" in out  # x * 3 + 1: the first backend still runs
    assert "FAILURES: [('backend test_echo', 'registration_conflict')]" in out


@pytest.mark.shared_runtime
def test_kernel_collision_with_the_runtime(plugins, tmp_path):
    single_op_program(tmp_path / "relu.kiln", "aten::relu")
    proc = run_python(f"""
        import numpy as np, kiln
        try:
            kiln.load_library({str(plugins / 'librelu_clash.so')!r})
        except kiln.RegistrationError as e:
            print("ERROR:", e)
        (y,) = kiln.load({str(tmp_path / 'relu.kiln')!r}).forward(np.array([-1, 2, -3, 4], dtype=np.float32))
        print("RESULT:", y.tolist())
        owners = {{k.library for k in kiln.registered_kernels() if k.op_name == "aten::relu.default"}}
        print("OWNERS:", sorted(owners))
        print("OTHER:", [k.library.rsplit('/', 1)[-1] for k in kiln.registered_kernels()
                         if k.op_name == "kiln_test::only_here.default"])
    """)
    out = proc.stdout
    error = next(l for l in out.splitlines() if l.startswith("ERROR:"))
    assert "kernel aten::relu.default [f32]" in error
    assert "librelu_clash.so" in error and "libkiln.so.0" in error
    assert "RESULT: [0.0, 2.0, 0.0, 4.0]" in out  # the portable relu, not the clashing one
    assert f"OWNERS: [{kiln.runtime_library_path()!r}]" in out
    assert "OTHER: ['librelu_clash.so']" in out  # its non-clashing registration stands


@pytest.mark.shared_runtime
def test_abi_mismatch_is_refused(plugins):
    proc = run_python(f"""
        import kiln
        try:
            kiln.load_library({str(plugins / 'libwrong_abi.so')!r})
        except kiln.AbiMismatch as e:
            print("ERROR:", e)
        print("REGISTERED:", any(k.op_name == "kiln_test::stale.default" for k in kiln.registered_kernels()))
    """)
    abi = kiln._kiln.ABI_VERSION  # wrong_abi.cpp registers with ABI + 41
    assert f"was built for kiln ABI {abi + 41}, this runtime is ABI {abi}" in proc.stdout
    assert "REGISTERED: False" in proc.stdout


@pytest.mark.shared_runtime
def test_library_errors(plugins, tmp_path):
    with pytest.raises(kiln.KilnError, match="does not exist"):
        kiln.load_library(tmp_path / "missing.so")
    not_a_library = tmp_path / "text.so"
    not_a_library.write_text("hello")
    with pytest.raises(kiln.InvalidArgument, match="cannot load library"):
        kiln.load_library(not_a_library)
    with pytest.raises(kiln.InvalidArgument, match="registered no kernel and no backend"):
        kiln.load_library(plugins / "libregisters_nothing.so")


@pytest.mark.shared_runtime
def test_loading_twice_returns_the_same_registrations(plugins):
    proc = run_python(f"""
        import kiln
        a = kiln.load_library({str(plugins / 'libecho_plus_one.so')!r})
        b = kiln.load_library({str(plugins / 'libecho_plus_one.so')!r})
        assert a == b and len(kiln.registered_backends()) == 1, (a, b)
        print("OK")
    """)
    assert "OK" in proc.stdout
