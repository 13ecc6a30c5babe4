"""The kiln command: SDK locators, inspect, run, doctor (also as python -m kiln)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import clean_env


def kiln_cmd(*args, module=False):
    if module:
        cmd = [sys.executable, "-m", "kiln", *args]
    else:
        cmd = [os.path.join(sysconfig.get_path("scripts"), "kiln"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=120)


@pytest.mark.shared_runtime
def test_locators_point_into_the_installed_package():
    root = Path(kiln.__file__).parent
    for module in (False, True):
        out = {flag: kiln_cmd(flag, module=module).stdout.strip()
               for flag in ("--cmakedir", "--pkgconfigdir", "--includes", "--libs", "--version")}
        assert Path(out["--cmakedir"], "kilnConfig.cmake").is_file()
        assert Path(out["--pkgconfigdir"], "kiln.pc").is_file()
        assert out["--includes"] == f"-I{root / 'include'}"
        assert Path(out["--includes"][2:], "kiln", "kiln.h").is_file()
        assert out["--libs"].split()[0] == str(root / "lib" / "libkiln.so.0")
        assert out["--version"] == kiln.__version__
    assert kiln.cmake_dir() == out["--cmakedir"]


def test_inspect(exported):
    path, *_ = exported("two_methods")
    proc = kiln_cmd("inspect", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "method forward" in proc.stdout and "method encode" in proc.stdout
    assert "input  x: float32[3, 16]" in proc.stdout


def test_inspect_load_times_and_the_packed_cache(exported, tmp_path):
    """--load prints the load's parts and what the packed-weight cache did: the first load packs
    and writes the cache, the second maps all of its packed weights from it."""
    program = tmp_path / "mlp.kiln"
    shutil.copyfile(exported("mlp")[0], program)  # the cache is keyed by the file's identity
    cache = tmp_path / "cache"
    runs = [kiln_cmd("inspect", str(program), "--load", "--packed-cache", str(cache)) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"^load: [0-9.]+ ms \(program [0-9.]+ ms, method forward [0-9.]+ ms\)$", proc.stdout,
                         re.M), proc.stdout
    first, second = (re.search(r"mapped from the cache: (\d+) of (\d+) bytes", p.stdout).groups() for p in runs)
    assert first[0] == "0" and int(first[1]) > 0, runs[0].stdout
    assert second[0] == second[1] == first[1], runs[1].stdout
    assert "; wrote " in runs[0].stdout and f"packed-weight cache: mapped {cache}" in runs[1].stdout, runs[1].stdout


def test_run_with_npy_inputs(exported, tmp_path):
    path, model, (x,), _ = exported("mlp")
    np.save(tmp_path / "x.npy", x.numpy())
    proc = kiln_cmd("run", str(path), str(tmp_path / "x.npy"), "--save", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out_0.npy"), model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_bad_file_is_a_clean_error(tmp_path):
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(b"not a program at all")
    proc = kiln_cmd("inspect", str(bad))
    assert proc.returncode == 1
    assert "InvalidProgram" in proc.stderr and "Traceback" not in proc.stderr


def test_doctor():
    proc = kiln_cmd("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"runtime library: {kiln.runtime_library_path()}" in proc.stdout and "kernels:" in proc.stdout


@pytest.mark.static_runtime
def test_static_build_has_no_sdk():
    proc = kiln_cmd("--cmakedir")
    assert proc.returncode == 1 and "KILN_BUILD_SHARED=OFF" in proc.stderr


def test_inspect_does_not_need_the_programs_kernels(tmp_path):
    # A program whose backend is not loaded still shows its interface.
    from program_builder import backend_program

    backend_program(tmp_path / "p.kiln", backend="not_loaded_anywhere")
    proc = kiln_cmd("inspect", str(tmp_path / "p.kiln"))
    assert proc.returncode == 0, proc.stderr
    assert "input  x: float32[4]" in proc.stdout


def test_ops_lists_every_exportable_operator_with_a_kernel():
    """The exporter's operator list and the runtime's kernels agree both ways."""
    from kiln.export.operators import SUPPORTED_OPERATORS

    result = kiln_cmd("ops")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines()[:-1]}
    assert result.stdout.splitlines()[-1].startswith(f"{len(listed)} operators;")
    assert set(SUPPORTED_OPERATORS) <= listed, set(SUPPORTED_OPERATORS) - listed
    builtin = {k.op_name for k in kiln.registered_kernels()
               if os.path.basename(k.library) == os.path.basename(kiln.runtime_library_path())}
    assert builtin <= set(SUPPORTED_OPERATORS), builtin - set(SUPPORTED_OPERATORS)
    assert "aten::linear.default" in listed and "f32,f32,f32" in result.stdout


# docs/operators.md ends with the OpInfo sweep's summary, from this line on (written by
# scripts/opinfo_sweep.py --operators-md); what comes before it is `kiln ops --markdown`.
OPINFO_SUMMARY_MARKER = "<!-- the OpInfo summary below is written by scripts/opinfo_sweep.py --operators-md -->"


@pytest.mark.build_independent
def test_operator_docs_are_up_to_date():
    repo = Path(__file__).resolve().parent.parent
    generated = kiln_cmd("ops", "--markdown").stdout
    text = (repo / "docs" / "operators.md").read_text()
    how = ("regenerate it with `kiln ops --markdown > docs/operators.md`, then put the OpInfo summary back "
           "with `python scripts/opinfo_sweep.py --from-json KILN.json --compare ET.json "
           "--operators-md docs/operators.md` (scripts/opinfo_sweep.py's docstring)")
    assert OPINFO_SUMMARY_MARKER in text, f"docs/operators.md has no OpInfo summary: {how}"
    assert text.split(OPINFO_SUMMARY_MARKER)[0] == generated + "\n", f"docs/operators.md is stale: {how}"


def test_inspect_shows_dynamic_ranges_and_state(exported):
    path, *_ = exported("dynamic_state")
    proc = kiln_cmd("inspect", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "input  x: float32[2, 0..12, 8]" in proc.stdout
    assert "output output_0: float32[2, 2, 0..24]" in proc.stdout
    assert "state  calls: float32[1]" in proc.stdout and "state  summary: float32[4, 8]" in proc.stdout


@pytest.mark.parametrize("case", ["missing", "text", "object", "directory", "save_dir"])
def test_run_reports_bad_input_files_without_a_traceback(exported, tmp_path, case):
    """Defect 7: bad .npy inputs and --save into a missing folder printed raw tracebacks."""
    path, *_ = exported("mlp")
    good = tmp_path / "x.npy"
    np.save(good, np.zeros((4, 32), np.float32))
    args, expected = {
        "missing": ([str(tmp_path / "nope.npy")], "cannot read input 0 from"),
        "text": ([str(tmp_path / "text.npy")], "cannot read input 0 from"),
        "object": ([str(tmp_path / "object.npy")], "cannot read input 0 from"),
        "directory": ([str(tmp_path)], "cannot read input 0 from"),
        "save_dir": ([str(good), "--save", str(tmp_path / "missing" / "out")], "cannot write output 0 to"),
    }[case]
    (tmp_path / "text.npy").write_text("1 2 3\n")
    np.save(tmp_path / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    proc = kiln_cmd("run", str(path), *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("kiln: ") and expected in proc.stderr, proc.stderr
