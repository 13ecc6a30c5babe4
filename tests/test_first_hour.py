"""What a new user meets in the first hour, following the README.

Each test failed before its fix: the README's C++ snippet did not check its
Results and warned under -Wall -Wextra (a Span built from a braced list points
at a dead array), an unchecked `->` on a failed Result died with a bare
"Illegal instruction", every export printed torch's LeafSpec FutureWarning,
`kiln run` made random inputs without saying so, a missing method's error did
not say which methods exist, a float64 input's error did not say how to
convert, and the unsupported-operator error did not point anywhere useful.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import REPO, clean_env


def _pkg_config(*args: str) -> list:
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is not installed (apt-get install pkg-config)")
    env = clean_env(PKG_CONFIG_PATH=kiln.pkgconfig_dir())
    out = subprocess.run(["pkg-config", *args, "kiln"], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def _compile(source: Path, binary: Path) -> None:
    """Compiles with the flags pkg-config gives (-I, not -isystem: the headers' own warnings show),
    every warning an error."""
    cmd = [shutil.which("c++") or "g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", str(source), "-o", str(binary),
           *_pkg_config("--cflags", "--libs")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stderr}"


def _readme_cpp_program() -> str:
    blocks = re.findall(r"```cpp\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    programs = [b for b in blocks if "int main" in b]
    assert len(programs) == 1, "the README's C++ section should hold one complete program"
    return programs[0]


@pytest.fixture(scope="module")
def readme_program(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("readme_cpp")
    (build / "main.cpp").write_text(_readme_cpp_program())
    _compile(build / "main.cpp", build / "readme_app")
    return build / "readme_app"


@pytest.mark.shared_runtime  # the C++ SDK (pkg-config)
def test_readme_cpp_program_compiles_warning_free_and_prints_an_output(readme_program, tmp_path, torch):
    from kiln.export import export

    import models

    model = models.ResidualCNN().eval()
    x = torch.zeros(1, 3, 32, 32)
    export(model, (x,), tmp_path / "model.kiln")
    proc = subprocess.run([str(readme_program)], cwd=tmp_path, env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with torch.no_grad():
        first = float(model(x).flatten()[0])
        classes = model(x).shape[1]
    shape, value = re.fullmatch(r"(f32\[1, \d+\]), first value (\S+)\n", proc.stdout).groups()
    assert shape == f"f32[1, {classes}]"
    assert abs(float(value) - first) <= 1e-4 * max(1.0, abs(first))


@pytest.mark.shared_runtime  # the C++ SDK (pkg-config)
def test_readme_cpp_program_prints_the_status_of_a_missing_file(readme_program, tmp_path):
    proc = subprocess.run([str(readme_program)], cwd=tmp_path, env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert re.fullmatch(r"[a-z_]+: .*model\.kiln.*\n", proc.stderr), proc.stderr


@pytest.mark.shared_runtime  # the C++ SDK (pkg-config)
def test_unchecked_result_says_why_before_aborting(tmp_path):
    (tmp_path / "main.cpp").write_text(
        "#include <kiln/kiln.h>\n"
        "int main() { return static_cast<int>(kiln::Program::load(\"/nonexistent/model.kiln\")"
        "->method_names().size()); }\n")
    _compile(tmp_path / "main.cpp", tmp_path / "unchecked")
    proc = subprocess.run([str(tmp_path / "unchecked")], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr)
    assert "kiln: a Result was used without a value (check ok() first): " in proc.stderr
    assert "/nonexistent/model.kiln" in proc.stderr


def test_export_does_not_show_torch_internal_warnings(tmp_path, torch):
    from kiln.export import export

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export(torch.nn.Linear(4, 3).eval(), (torch.randn(2, 4),), tmp_path / "linear.kiln")
        warnings.warn("a warning of the user's own", UserWarning)  # positive control: recording works
    messages = [str(w.message) for w in caught]
    assert "a warning of the user's own" in messages
    assert not [m for m in messages if "LeafSpec" in m], messages


def test_python_m_kiln_without_a_command_prints_the_help():
    proc = subprocess.run([sys.executable, "-m", "kiln"], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout.startswith("usage: kiln")
    assert "inspect" in proc.stdout and "generate" in proc.stdout


def test_kiln_ops_explains_the_star():
    proc = subprocess.run([sys.executable, "-m", "kiln", "ops"], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0
    assert "'*' = the kernel checks them itself" in proc.stdout.splitlines()[-1]


def test_kiln_run_says_it_made_random_inputs(exported):
    path, *_ = exported("mlp")
    proc = subprocess.run([sys.executable, "-m", "kiln", "run", str(path), "--seed", "3"], env=clean_env(),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "no input files given; running on random inputs at each input's largest shape (--seed 3): " \
           "float32[" in proc.stderr
    again = subprocess.run([sys.executable, "-m", "kiln", "run", str(path), "--seed", "3"], env=clean_env(),
                           capture_output=True, text=True)
    assert again.stdout == proc.stdout  # the seed makes them reproducible


def test_missing_method_lists_the_methods_that_exist(exported):
    path, *_ = exported("two_methods")
    program = kiln.load(path)
    with pytest.raises(kiln.NotFound, match=r"no method 'decode' \(its methods: 'forward', 'encode'\)"):
        program.method("decode")
    with pytest.raises(kiln.NotFound, match=r"its methods: 'forward', 'encode'"):
        program.load_method("decode")


def test_float64_input_is_refused_with_how_to_convert(exported):
    path, _, inputs, _ = exported("mlp")
    x = inputs[0].numpy()
    method = kiln.load(path).method("forward")
    with pytest.raises(kiln.InvalidInput, match=r"wrong dtype: expected f32\[.*\], got f64\[.*\] \(inputs are not "
                                                r"converted: convert the data first, e\.g\. with numpy's "
                                                r"x\.astype\(\.\.\.\)"):
        method(x.astype(np.float64))
    method(x.astype(np.float64).astype(np.float32))  # as the message says


def test_unsupported_operator_error_points_at_the_ways_forward(tmp_path, torch):
    from kiln.errors import UnsupportedOperatorError
    from kiln.export import export

    class Bessel(torch.nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x)

    with pytest.raises(UnsupportedOperatorError) as info:
        export(Bessel(), (torch.randn(3),), tmp_path / "bessel.kiln")
    message = str(info.value)
    assert "aten::special_bessel_j0.default" in message
    assert "`kiln ops`" in message and "docs/extending.md" in message
    assert not (tmp_path / "bessel.kiln").exists()
