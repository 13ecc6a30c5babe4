"""The installed C++ SDK consumed through find_package(kiln): several CMake releases and generators,
relocated binaries, a moved package, repeated finds, components, the variable style, the version floor
and the scikit-build-core entry point.

Every consumer is configured out of tree against the installed package, in an environment without
LD_LIBRARY_PATH / LD_PRELOAD (conftest.clean_env). Each CMake of the matrix is pip-installed once into
its own venv under ~/.cache/kiln-tests (KILN_TEST_CACHE overrides the directory) and reused after.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.resources
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import REPO, build_cmake_project, clean_env, cmake_executable

pytestmark = pytest.mark.shared_runtime

CONSUMERS = REPO / "tests" / "cpp" / "consumers"
HELLO = REPO / "examples" / "cpp" / "hello"
CACHE = Path(os.environ.get("KILN_TEST_CACHE") or Path.home() / ".cache" / "kiln-tests")

# pip's cmake release series, each pinned as "==X.Y.*" (so the latest patch of
# the series): kiln's floor 3.24, 3.28 (the first that keeps '$' in link
# options), the last 3.x and the newest 4.x. `pip index versions cmake` listed
# 3.24.3, 3.28.4, 3.31.10 and 4.4.5 as the newest of each when this was written.
CMAKE_SERIES = ["3.24", "3.28", "3.31", "4.4"]
# The floor and the newest are built in the default tier; the releases between in the full tier.
MATRIX = [pytest.param(s, marks=[] if s in ("3.24", "4.4") else [pytest.mark.full]) for s in CMAKE_SERIES]
GENERATORS = ["Ninja", "Unix Makefiles"]
# The release just below kiln's floor (3.23.3 on PyPI), for the config file's own version check.
TOO_OLD_SERIES = "3.23"


# --- tools -----------------------------------------------------------------------------------------

class CMakeUnavailable(Exception):
    pass


def _cmake_version(exe: Path) -> str | None:
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"cmake version (\S+)", out)
    return m.group(1) if m else None


def pip_cmake(series: str) -> tuple[str, str]:
    """(cmake executable, its version) of pip's cmake==<series>.* in a venv of its own, made once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / f"cmake-{series}"
    exe = venv / "bin" / "cmake"
    ready = venv / "kiln-tests-ready"
    # One creator at a time (parallel test runs or sessions); the marker is written last.
    with open(CACHE / f"cmake-{series}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            version = _cmake_version(exe)
            if version and version.startswith(series + "."):
                return str(exe), version
        shutil.rmtree(venv, ignore_errors=True)
        env = {k: v for k, v in clean_env().items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
        for cmd in ([sys.executable, "-m", "venv", str(venv)],
                    [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                     "--disable-pip-version-check", f"cmake=={series}.*"]):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
            if proc.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise CMakeUnavailable(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
        version = _cmake_version(exe)
        if not (version and version.startswith(series + ".")):
            raise CMakeUnavailable(f"{exe} reports version {version!r}, expected {series}.*")
        ready.write_text(version + "\n")
        return str(exe), version


@pytest.fixture(scope="session")
def matrix_cmake():
    found: dict = {}

    def get(series: str) -> tuple[str, str]:
        if series not in found:
            try:
                found[series] = pip_cmake(series)
            except CMakeUnavailable as e:
                pytest.fail(f"cannot install cmake=={series}.* from pip: {e}")
        return found[series]

    return get


def tool(name: str) -> str:
    exe = shutil.which(name, path=sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", ""))
    assert exe, f"{name} is not installed (pip install {name})"
    return exe


def consumer_env() -> dict:
    """clean_env() without anything that would point CMake at a kiln other than the one a test names."""
    return {k: v for k, v in clean_env().items()
            if k not in ("CMAKE_PREFIX_PATH", "kiln_DIR", "kiln_ROOT", "KILN_ROOT", "CMAKE_GENERATOR")}


def build(source: Path, build_dir: Path, *, cmake: str | None = None, generator: str = "Ninja",
          defines: dict | None = None) -> Path:
    if generator == "Ninja":
        tool("ninja")  # build_cmake_project passes it as CMAKE_MAKE_PROGRAM
    build_cmake_project(source, build_dir, cmake=cmake, generator=generator, defines=defines,
                        env=consumer_env())
    return build_dir


def configure(source: Path, build_dir: Path, *, cmake: str | None = None,
              defines: dict | None = None) -> subprocess.CompletedProcess:
    """Configure only, never raising: for the configure failures a test expects."""
    args = [cmake or cmake_executable(), "-S", str(source), "-B", str(build_dir), "-G", "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}"]
    args += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    return subprocess.run(args, capture_output=True, text=True, env=consumer_env(), timeout=300)


def cache_value(build_dir: Path, name: str) -> str:
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", (build_dir / "CMakeCache.txt").read_text(), re.M)
    assert m, f"{name} is not in {build_dir}/CMakeCache.txt"
    return m.group(1)


def one_line(text: str) -> str:
    return " ".join(text.split())  # CMake indents and may wrap the messages it prints


def dynamic_section(binary: Path) -> tuple[list, list | None, bool]:
    """(NEEDED entries, RUNPATH entries or None, whether there is an RPATH) from readelf -d."""
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s.*\[(.*)\]", out)
    runpath = re.search(r"\(RUNPATH\)\s.*\[(.*)\]", out)
    return needed, runpath.group(1).split(":") if runpath else None, "(RPATH)" in out


def same_file(a, b) -> bool:
    return Path(a).resolve() == Path(b).resolve()


# --- the program every hello run executes, and running it ---------------------------------------

@pytest.fixture(scope="module")
def cnn(exported, tmp_path_factory):
    """(program, raw float32 input file, outputs of kiln.load(program).forward(x) in Python)."""
    path, _, (x,), _ = exported("cnn")
    x = x.numpy()
    assert x.dtype == np.float32
    xfile = tmp_path_factory.mktemp("cnn_input") / "x.bin"
    x.tofile(xfile)
    want = [np.asarray(o) for o in kiln.load(path).forward(x)]
    assert want
    return path, xfile, want


@pytest.fixture(scope="session")
def hide_package(tmp_path_factory):
    """hide_package(cmd) -> cmd run with the installed kiln package dir covered by an empty one.

    Uses a private mount namespace (unshare, as root); where that is not allowed it returns the
    command unchanged and the tests rely on their other evidence (RUNPATH, a run without the copy)."""
    package = Path(kiln.__file__).resolve().parent
    empty = tmp_path_factory.mktemp("empty")
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'

    def wrap(cmd: list) -> list:
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                str(empty), str(package), *map(str, cmd)]

    try:
        probe = subprocess.run(wrap(["sh", "-c", f'test ! -e "{kiln.library_path()}"']),
                               capture_output=True, text=True, timeout=30)
        works = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    if works:
        return wrap
    warnings.warn("cannot hide the installed kiln package (unshare/mount not permitted): relocation "
                  "tests rely on RUNPATH and a run without the copied library only")
    return lambda cmd: list(map(str, cmd))


def run_hello(hello: Path, cnn, *, wrap=None) -> subprocess.CompletedProcess:
    path, xfile, _ = cnn
    cmd = [str(hello), str(path), "--input", str(xfile), "--all"]
    return subprocess.run(wrap(cmd) if wrap else cmd, capture_output=True, text=True, env=clean_env(),
                          timeout=120)


def check_hello_output(proc: subprocess.CompletedProcess, cnn, runtime) -> None:
    """hello ran, used the libkiln.so.0 at `runtime` and printed exactly Python's outputs."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    m = re.search(r"^program .*, runtime (.+)$", proc.stdout, re.M)
    assert m, proc.stdout
    assert same_file(m.group(1), runtime), f"loaded {m.group(1)}, expected {runtime}"
    assert "input  x: f32[2, 3, 32, 32]" in proc.stdout
    got = re.findall(r"^  values (.*)$", proc.stdout, re.M)
    want = cnn[2]
    assert len(got) == len(want), proc.stdout
    for line, w in zip(got, want):
        assert "..." not in line
        values = np.array([float(v) for v in line.split()])
        assert values.size == w.size
        np.testing.assert_allclose(values, w.ravel(), rtol=1e-6, atol=1e-6)


def check_consumer_runpath(binary: Path, lib_dir: str) -> None:
    needed, runpath, has_rpath = dynamic_section(binary)
    assert "libkiln.so.0" in needed, needed
    assert runpath is not None and not has_rpath, "expected DT_RUNPATH and no DT_RPATH"
    assert "$ORIGIN" in runpath and "$ORIGIN/../lib" in runpath, runpath  # literal, not expanded
    assert lib_dir in runpath, runpath


# --- 1. consumer matrix: CMake releases x generators ------------------------------------------------

@pytest.mark.parametrize("generator", GENERATORS, ids=["ninja", "make"])
@pytest.mark.parametrize("series", MATRIX, ids=[f"cmake{s}" for s in CMAKE_SERIES])
def test_hello_matrix(series, generator, matrix_cmake, cnn, tmp_path):
    cmake, version = matrix_cmake(series)
    out = build(HELLO, tmp_path / "build", cmake=cmake, generator=generator,
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    # The venv's CMake did the configure, with the generator asked for, and found the installed SDK.
    cached = ".".join(cache_value(out, f"CMAKE_CACHE_{p}_VERSION") for p in ("MAJOR", "MINOR", "PATCH"))
    assert version.startswith(cached), (cached, version)
    assert cache_value(out, "CMAKE_GENERATOR") == generator
    assert same_file(cache_value(out, "kiln_DIR"), kiln.cmake_dir())

    hello = out / "hello"
    check_consumer_runpath(hello, kiln.lib_dir())
    check_hello_output(run_hello(hello, cnn), cnn, runtime=kiln.library_path())


@pytest.mark.parametrize("series, generator", [("3.24", "Ninja"), ("3.24", "Unix Makefiles"), ("4.4", "Ninja")],
                         ids=["cmake3.24-ninja", "cmake3.24-make", "cmake4.4-ninja"])
def test_c_consumer(series, generator, matrix_cmake, cnn, tmp_path):
    """examples/c, a project of LANGUAGES C only linking kiln::c (docs/c_api.md), at the floor and the
    newest CMake: configured without a C++ compiler, the same RUNPATH as a C++ consumer, and it runs."""
    cmake, _ = matrix_cmake(series)
    out = build(REPO / "examples" / "c", tmp_path / "build", cmake=cmake, generator=generator,
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    assert "CMAKE_CXX_COMPILER:" not in (out / "CMakeCache.txt").read_text()
    exe = out / "kiln_c_example"
    check_consumer_runpath(exe, kiln.lib_dir())
    path, *_ = cnn
    proc = subprocess.run([str(exe), str(path)], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "method forward\n  input  x: f32[2, 3, 32, 32]\n" in proc.stdout


# --- 2. a built consumer moved next to a copy of libkiln.so.0 ----------------------------------------

@pytest.fixture(scope="module")
def hello_binary(tmp_path_factory) -> Path:
    out = build(HELLO, tmp_path_factory.mktemp("hello"), defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return out / "hello"


@pytest.mark.parametrize("exe_rel, lib_rel", [("app/bin/hello", "app/lib"), ("flat/hello", "flat")],
                         ids=["bin-and-lib", "side-by-side"])
def test_relocated_binary(exe_rel, lib_rel, hello_binary, cnn, hide_package, tmp_path):
    exe, lib = tmp_path / exe_rel, tmp_path / lib_rel / "libkiln.so.0"
    exe.parent.mkdir(parents=True, exist_ok=True)
    lib.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(hello_binary, exe)
    shutil.copy2(kiln.library_path(), lib)
    subprocess.run([tool("patchelf"), "--set-rpath", "$ORIGIN:$ORIGIN/../lib", str(exe)], check=True)
    needed, runpath, has_rpath = dynamic_section(exe)
    assert "libkiln.so.0" in needed
    assert runpath == ["$ORIGIN", "$ORIGIN/../lib"] and not has_rpath

    # Nothing but the copy can satisfy it now: without the copy it does not start.
    hidden = lib.with_name("libkiln.so.0.away")
    lib.rename(hidden)
    proc = run_hello(exe, cnn)
    assert proc.returncode != 0 and "libkiln.so.0" in proc.stderr, (proc.returncode, proc.stdout, proc.stderr)
    hidden.rename(lib)

    # With the copy it runs and gives Python's outputs, even with the installed package out of sight.
    check_hello_output(run_hello(exe, cnn, wrap=hide_package), cnn, runtime=lib)


# --- 3. the whole installed package moved to another prefix ----------------------------------------

def test_moved_package(cnn, hide_package, tmp_path):
    moved = tmp_path / "moved prefix" / "kiln"  # a space in the path, too
    shutil.copytree(Path(kiln.__file__).resolve().parent, moved, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    cmake_dir = moved / "lib" / "cmake" / "kiln"
    out = build(HELLO, tmp_path / "build", defines={"CMAKE_PREFIX_PATH": cmake_dir})
    assert same_file(cache_value(out, "kiln_DIR"), cmake_dir)

    hello = out / "hello"
    check_consumer_runpath(hello, str(moved / "lib"))
    assert kiln.lib_dir() not in dynamic_section(hello)[1]
    check_hello_output(run_hello(hello, cnn, wrap=hide_package), cnn, runtime=moved / "lib" / "libkiln.so.0")


# --- 4. find_package(kiln) many times in one project ------------------------------------------------

@pytest.mark.parametrize("top_level_find", ["ON", "OFF"], ids=["top-and-subdirs", "sibling-subdirs"])
def test_repeated_find_package(top_level_find, tmp_path):
    out = build(CONSUMERS / "two_subdirs", tmp_path / "build",
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "TOP_LEVEL_FIND": top_level_find})

    proc = subprocess.run([str(out / "list_kernels" / "list_kernels")], capture_output=True, text=True,
                          env=clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^kernel (\S+) (\S+)$", proc.stdout, re.M)  # one per registration (and tier)
    # The same registry the Python module sees in libkiln.so.0 (plugins other tests loaded excluded).
    builtin = {(k.op_name, k.dtypes) for k in kiln.registered_kernels() if same_file(k.library, kiln.library_path())}
    assert lines and set(lines) == builtin
    assert re.search(rf"^kernels {len(lines)}, runtime (.+)$", proc.stdout, re.M)

    proc = subprocess.run([str(out / "show_runtime" / "show_runtime")], capture_output=True, text=True,
                          env=clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"version {kiln.__version__}, runtime ")
    assert same_file(proc.stdout.split("runtime ", 1)[1].strip(), kiln.library_path())


# --- 5. COMPONENTS ------------------------------------------------------------------------------------

def test_components_runtime(tmp_path):
    out = build(CONSUMERS / "components", tmp_path / "build",
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "KILN_COMPONENTS": "runtime",
                         "OPTIONAL_PROBE": "ON"})
    proc = subprocess.run([str(out / "components_app")], capture_output=True, text=True, env=clean_env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"version {kiln.__version__}, runtime ")


@pytest.mark.parametrize("components", ["nonexistent_thing", "runtime;nonexistent_thing"],
                         ids=["unknown", "runtime-and-unknown"])
def test_components_unknown_fails_at_configure(components, tmp_path):
    proc = configure(CONSUMERS / "components", tmp_path / "build",
                     defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "KILN_COMPONENTS": components})
    log = one_line(proc.stdout + proc.stderr)
    assert proc.returncode != 0, log
    assert "kiln has no component 'nonexistent_thing' (available: runtime;c;quantized;llm)" in log, log
    assert not (tmp_path / "build" / "build.ninja").exists()  # stopped at configure, nothing generated


# --- 6. the variable style -----------------------------------------------------------------------------

def test_variables_consumer(tmp_path):
    major_minor = ".".join(kiln.__version__.split(".")[:2])
    out = build(CONSUMERS / "variables", tmp_path / "build",
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "EXPECTED_KILN_VERSION": kiln.__version__,
                         "KILN_REQUEST_VERSION": major_minor})
    assert cache_value(out, "CMAKE_PROJECT_NAME") == "kiln_variables"
    proc = subprocess.run([str(out / "variables_app")], capture_output=True, text=True, env=clean_env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"version {kiln.__version__}, runtime ")
    assert same_file(proc.stdout.split("runtime ", 1)[1].strip(), kiln.library_path())


def test_version_request_above_installed_fails(tmp_path):
    proc = configure(CONSUMERS / "variables", tmp_path / "build",
                     defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "EXPECTED_KILN_VERSION": kiln.__version__,
                              "KILN_REQUEST_VERSION": "99.0"})
    log = one_line(proc.stdout + proc.stderr)
    assert proc.returncode != 0
    assert "99.0" in log and kiln.__version__ in log, log  # CMake names the request and what it found


# --- 7. CMake older than kiln's floor -------------------------------------------------------------------

def test_cmake_older_than_floor_stopped_by_config(matrix_cmake, tmp_path):
    # A consumer whose cmake_minimum_required is below 3.24 gets past its own check with
    # CMake 3.23; kilnConfig.cmake must stop it with a message that says why. Like the
    # matrix, it fails (never skips) where pip cannot install that CMake.
    cmake, version = matrix_cmake(TOO_OLD_SERIES)
    proc = configure(CONSUMERS / "old_minimum", tmp_path / "build", cmake=cmake,
                     defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    log = one_line(proc.stdout + proc.stderr)
    assert proc.returncode != 0, log
    assert f"kiln needs CMake 3.24 or newer; this is CMake {version}" in log, log


# The same project with newer CMakes: kilnConfig.cmake runs under the policies of the consumer's
# cmake_minimum_required (CMake 3.x still accepts 3.0, where if(IN_LIST) does not exist; 4.x
# accepts 3.5 and up), and must set its own.
@pytest.mark.parametrize("series, minimum", [("3.24", "3.20"), ("3.24", "3.0"),
                                             pytest.param("3.31", "3.0", marks=pytest.mark.full), ("4.4", "3.5")],
                         ids=["cmake3.24-min3.20", "cmake3.24-min3.0", "cmake3.31-min3.0", "cmake4.4-min3.5"])
def test_low_minimum_consumer_builds(series, minimum, matrix_cmake, tmp_path):
    cmake, _ = matrix_cmake(series)
    out = build(CONSUMERS / "old_minimum", tmp_path / "build", cmake=cmake,
                defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir(), "MINIMUM": minimum})
    check_consumer_runpath(out / "old_minimum_app", kiln.lib_dir())
    proc = subprocess.run([str(out / "old_minimum_app")], capture_output=True, text=True, env=clean_env(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert same_file(proc.stdout.split("runtime ", 1)[1].strip(), kiln.library_path())


# --- 8. scikit-build-core's cmake.root entry point ----------------------------------------------------

def test_cmake_root_entry_point(tmp_path):
    eps = importlib.metadata.entry_points()
    group = eps.select(group="cmake.root") if hasattr(eps, "select") else eps.get("cmake.root", [])
    ours = [ep for ep in group if ep.name == "kiln"]
    assert len(ours) == 1, list(group)
    ep = ours[0]
    assert ep.value == "kiln"
    if getattr(ep, "dist", None) is not None:
        assert ep.dist.metadata["Name"] == "kiln"
    # scikit-build-core turns it into kiln_ROOT=<files(module)> for a downstream build.
    root = Path(str(importlib.resources.files(ep.load())))
    assert same_file(root, Path(kiln.__file__).parent)
    proc = configure(HELLO, tmp_path / "with_root", defines={"kiln_ROOT": root})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert same_file(cache_value(tmp_path / "with_root", "kiln_DIR"), kiln.cmake_dir())
    # ... and it is kiln_ROOT that found it: without it (nor CMAKE_PREFIX_PATH) the configure fails.
    proc = configure(HELLO, tmp_path / "without_root")
    assert proc.returncode != 0
    assert 'Could not find a package configuration file provided by "kiln"' in proc.stderr, proc.stderr
