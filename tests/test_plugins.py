"""How plugins reach the one runtime without code that names them.

  * KILN_PLUGIN_PATH: a C++ app (examples/cpp/hello, which knows nothing of
    plugins) runs a program whose backend only the plugin provides, and fails
    with missing_backend without the variable; a bad entry is logged and does
    not stop programs that do not need it (nor the good entries after it).
  * Entry points: an installed distribution declaring the plugin in the
    "kiln.plugins" group is loaded by kiln.load_plugins(), and lazily by
    Program.method when a kernel or backend is missing.

The plugin is tests/cpp/one_runtime's one_runtime_plugin (kernel
one_runtime::add_ten.default, backend "one_runtime_echo": x * scale + 10),
built against the installed wheel with find_package(kiln). Each scenario runs
in a fresh process.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_one_runtime import PLUGIN_BACKEND, PLUGIN_KERNEL, RUNTIME, one_runtime_project

import kiln

from conftest import REPO, build_cmake_project, clean_env
from program_builder import backend_program, single_op_program

pytestmark = pytest.mark.shared_runtime


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    return one_runtime_project(tmp_path_factory) / "libone_runtime_plugin.so"


@pytest.fixture(scope="module")
def hello(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("hello_plugins")
    build_cmake_project(REPO / "examples" / "cpp" / "hello", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build / "hello"


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("plugin_programs")
    backend_program(d / "echo.kiln", backend=PLUGIN_BACKEND, scale=3.0)          # needs the plugin
    single_op_program(d / "relu.kiln", "aten::relu")                             # needs nothing but the runtime
    single_op_program(d / "add_ten.kiln", "one_runtime::add_ten")                # needs the plugin's kernel
    backend_program(d / "nobody.kiln", backend="nobody_provides_this")          # needs what no plugin has
    return d


def run_hello(hello: Path, program: Path, **env) -> subprocess.CompletedProcess:
    # hello fills every input with 1.0 and prints the outputs' values.
    return subprocess.run([str(hello), str(program)], capture_output=True, text=True, env=clean_env(**env), timeout=60)


def values(stdout: str) -> list:
    return re.findall(r"^  values (.*)$", stdout, re.M)


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=clean_env(**env), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ---------------------------------------------------------------------------
# KILN_PLUGIN_PATH


def test_plugin_path_provides_the_backend_to_a_cpp_app(hello, plugin, programs):
    without = run_hello(hello, programs / "echo.kiln")
    assert without.returncode == 1, without.stdout
    assert f"missing_backend: loading method 'forward': instruction 0: no backend named '{PLUGIN_BACKEND}'" \
        in without.stderr

    with_plugin = run_hello(hello, programs / "echo.kiln", KILN_PLUGIN_PATH=str(plugin))
    assert with_plugin.returncode == 0, with_plugin.stderr
    assert values(with_plugin.stdout) == ["13 13 13 13"]  # 1 * 3 + 10: the plugin's backend ran
    assert f"runtime {RUNTIME}" in with_plugin.stdout
    assert with_plugin.stderr == ""


def test_bad_plugin_path_entries_are_logged_and_skipped(hello, plugin, programs, tmp_path):
    not_a_library = tmp_path / "notes.txt"
    not_a_library.write_text("not a library")
    bad = f"{tmp_path / 'missing.so'}:{not_a_library}"

    # A program that needs no plugin runs; each bad entry is logged.
    proc = run_hello(hello, programs / "relu.kiln", KILN_PLUGIN_PATH=bad)
    assert proc.returncode == 0, proc.stderr
    assert values(proc.stdout) == ["1 1 1 1"]
    assert f"KILN_PLUGIN_PATH: library '{tmp_path / 'missing.so'}' does not exist" in proc.stderr
    assert f"KILN_PLUGIN_PATH: cannot load library '{not_a_library}'" in proc.stderr

    # Good entries after bad ones (and empty ones) are still loaded.
    proc = run_hello(hello, programs / "echo.kiln", KILN_PLUGIN_PATH=f"{bad}::{plugin}")
    assert proc.returncode == 0, proc.stderr
    assert values(proc.stdout) == ["13 13 13 13"]
    assert proc.stderr.count("KILN_PLUGIN_PATH:") == 2


def test_plugin_path_also_serves_python(plugin, programs):
    proc = run_python(f"""
        import numpy as np, kiln
        (y,) = kiln.load({str(programs / 'add_ten.kiln')!r}).forward(np.arange(4, dtype=np.float32))
        print("RESULT:", y.tolist())
        print("OWNER:", [k.library for k in kiln.registered_kernels() if k.op_name == {PLUGIN_KERNEL!r}])
    """, KILN_PLUGIN_PATH=str(plugin))
    assert "RESULT: [10.0, 11.0, 12.0, 13.0]" in proc.stdout
    assert f"OWNER: [{str(plugin)!r}]" in proc.stdout


# ---------------------------------------------------------------------------
# Entry points ("kiln.plugins")


@pytest.fixture
def fake_distribution(tmp_path, plugin) -> Path:
    """A directory that, on sys.path, looks like an installed distribution declaring the plugin."""
    site = tmp_path / "site"
    info = site / "fakeplugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kiln.plugins]\necho = fakeplugin:PLUGIN_PATH\n")
    (site / "fakeplugin.py").write_text(f"PLUGIN_PATH = {str(plugin)!r}\n")
    return site


def test_load_plugins_loads_entry_points(fake_distribution, plugin):
    proc = run_python(f"""
        import sys
        sys.path.insert(0, {str(fake_distribution)!r})
        from importlib.metadata import entry_points
        print("DECLARED:", [(ep.name, ep.value) for ep in entry_points(group="kiln.plugins")])
        import kiln
        print("BEFORE:", [b.name for b in kiln.registered_backends()])
        loaded = kiln.load_plugins()
        print("LOADED:", [(lib.path, [k.op_name for k in lib.kernels], [b.name for b in lib.backends])
                          for lib in loaded])
        print("AFTER:", [(b.name, b.library) for b in kiln.registered_backends()])
        print("AGAIN:", kiln.load_plugins() == loaded)
    """)
    out = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert out["DECLARED"] == "[('echo', 'fakeplugin:PLUGIN_PATH')]"
    assert out["BEFORE"] == "[]"
    assert out["LOADED"] == repr([(str(plugin), [PLUGIN_KERNEL], [PLUGIN_BACKEND])])
    assert out["AFTER"] == repr([(PLUGIN_BACKEND, str(plugin))])
    assert out["AGAIN"] == "True"


def test_entry_point_plugins_load_lazily(fake_distribution, programs):
    proc = run_python(f"""
        import sys
        sys.path.insert(0, {str(fake_distribution)!r})
        import numpy as np, kiln
        program = kiln.load({str(programs / 'echo.kiln')!r})
        print("BEFORE:", [b.name for b in kiln.registered_backends()])
        (y,) = program.forward(np.arange(4, dtype=np.float32))  # no load_plugins() call
        print("RESULT:", y.tolist())
        print("AFTER:", [b.name for b in kiln.registered_backends()])
        # Plugins are tried once: a backend that no plugin provides is still MissingBackend.
        try:
            kiln.load({str(programs / 'nobody.kiln')!r}).method("forward")
        except kiln.MissingBackend as e:
            print("MISSING:", e)
    """)
    out = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert out["BEFORE"] == "[]"
    assert out["RESULT"] == "[10.0, 13.0, 16.0, 19.0]"  # x * 3 + 10
    assert out["AFTER"] == repr([PLUGIN_BACKEND])
    assert "no backend named 'nobody_provides_this'" in out["MISSING"]
