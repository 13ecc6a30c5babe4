"""An extension library built with kiln_add_extension uses the one shared runtime.

The project is configured from the source tree with KILN_BUILD_PYTHON=OFF and
KILN_BUILD_TESTS=ON (which adds kiln_add_extension(example ...) from
tests/cpp/extension), only `kiln` and `kiln_example` are built, and the result
is installed into a fresh prefix. Then:

  * libkiln_example.so.0 is one real file with SONAME libkiln_example.so.0,
    NEEDED libkiln.so.0 first, RUNPATH exactly $ORIGIN, and defines none of the
    process-wide symbols (tools/check_single_runtime.py passes on the prefix);
  * a consumer with find_package(kiln REQUIRED COMPONENTS example) and
    kiln::example keeps the library NEEDED under -Wl,--as-needed although it
    references none of its symbols, and at run time the registry (libkiln.so.0
    of the prefix) lists kiln_example::add_one.default from that library;
  * an unknown component fails find_package, naming it.

The build directory is kept in build/extension-test so that reruns are fast.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO, build_cmake_project, clean_env, cmake_executable, with_ccache

pytestmark = pytest.mark.shared_runtime

BUILD_DIR = REPO / "build" / "extension-test"
CONSUMER = REPO / "tests" / "cpp" / "one_runtime" / "example_consumer"


def load_checker():
    spec = importlib.util.spec_from_file_location("check_single_runtime", REPO / "tools" / "check_single_runtime.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=kw.pop("env", clean_env()),
                          timeout=kw.pop("timeout", 1800), **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def dynamic(binary: Path) -> str:
    return run(["readelf", "-d", "-W", binary]).stdout


def needed(binary: Path) -> list:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic(binary))


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """<tmp>/kiln: the runtime and the example extension, installed."""
    cmake = cmake_executable()
    prefix = tmp_path_factory.mktemp("extension_prefix") / "kiln"
    ninja = shutil.which("ninja", path=sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", ""))
    configure = [cmake, "-S", REPO, "-B", BUILD_DIR, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 "-DKILN_BUILD_PYTHON=OFF", "-DKILN_BUILD_TESTS=ON", "-DKILN_BUILD_SHARED=ON",
                 f"-DCMAKE_INSTALL_PREFIX={prefix}", f"-DPython_EXECUTABLE={sys.executable}"]
    if ninja:
        configure.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
    env, launcher = with_ccache(clean_env())
    run(configure + launcher, env=env)
    # kiln_quantized and kiln_llm: the shipped extensions, installed by the same `cmake --install`.
    run([cmake, "--build", BUILD_DIR, "--target", "kiln", "kiln_example", "kiln_quantized", "kiln_llm"], env=env)
    run([cmake, "--install", BUILD_DIR])
    return prefix


def test_example_library_is_installed_as_one_file(prefix):
    lib = prefix / "lib" / "libkiln_example.so.0"
    assert lib.is_file() and not lib.is_symlink()
    assert sorted(p.name for p in (prefix / "lib").glob("libkiln*")) == ["libkiln.so.0", "libkiln_example.so.0",
                                                                         "libkiln_llm.so.0", "libkiln_quantized.so.0"]
    assert not [p for p in prefix.rglob("*") if p.is_symlink()]


def test_example_library_links_the_shared_runtime(prefix):
    lib = prefix / "lib" / "libkiln_example.so.0"
    text = dynamic(lib)
    print(text)
    assert re.findall(r"\(SONAME\)\s+Library soname: \[(.*)\]", text) == ["libkiln_example.so.0"]
    deps = needed(lib)
    assert deps and deps[0] == "libkiln.so.0", deps
    assert re.findall(r"\(RUNPATH\)\s+Library runpath: \[(.*)\]", text) == ["$ORIGIN"]
    assert "(RPATH)" not in text


def test_checker_passes_on_the_prefix(prefix):
    checker = load_checker()
    report = checker.check(prefix)
    print(report.text())
    assert report.ok, report.text()
    (example,) = [r for r in report.files if r.path.name == "libkiln_example.so.0"]
    assert not example.defined and not example.has_note
    assert "kiln::register_kernel" in example.undefined  # its registration goes to libkiln.so.0


@pytest.fixture(scope="module")
def consumer(prefix, tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("example_consumer")
    build_cmake_project(CONSUMER, build, defines={
        "CMAKE_PREFIX_PATH": prefix / "lib" / "cmake" / "kiln",
        "CMAKE_EXE_LINKER_FLAGS": "-Wl,--as-needed",
        "KILN_TEST_CONTROL": "ON",
    })
    return build


def test_consumer_keeps_the_registration_only_library(prefix, consumer):
    app, control = consumer / "app", consumer / "app_control"
    example = prefix / "lib" / "libkiln_example.so.0"
    # --as-needed is in force: the control app names the library on its link
    # line plainly, and the linker drops it.
    assert "libkiln_example.so.0" not in needed(control), needed(control)
    # The app references nothing from the library...
    provided = set(run(["nm", "-D", "--defined-only", example]).stdout.split()[2::3])
    wanted = set(run(["nm", "-D", "--undefined-only", app]).stdout.split()[1::2])
    assert not {s.split("@")[0] for s in wanted} & {s.split("@")[0] for s in provided}
    # ...and still needs it, thanks to kiln::example's link options.
    assert "libkiln_example.so.0" in needed(app), needed(app)

    proc = run([app], timeout=60)
    print(proc.stdout)
    runtime = re.search(r"^runtime (.*)$", proc.stdout, re.M).group(1)
    assert os.path.samefile(runtime, prefix / "lib" / "libkiln.so.0")
    assert "copies 1" in proc.stdout
    kernels = re.findall(r"^kernel (\S+) \[(.*)\] (.*)$", proc.stdout, re.M)
    assert [(op, dtypes) for op, dtypes, _ in kernels] == [("kiln_example::add_one.default", "f32")]
    assert os.path.samefile(kernels[0][2], example)


def test_unknown_component_fails_naming_it(prefix, tmp_path):
    with pytest.raises(AssertionError) as failure:
        build_cmake_project(CONSUMER, tmp_path, defines={"CMAKE_PREFIX_PATH": prefix / "lib" / "cmake" / "kiln",
                                                         "KILN_TEST_COMPONENT": "nope"})
    message = str(failure.value)
    assert "kiln has no component 'nope'" in message
    assert "available: runtime;c;quantized;llm;example" in message
