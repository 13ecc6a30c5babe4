"""Shared fixtures: the installed package, exported test models (cached per session), C++ builds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for tests/models.py and helpers

import kiln  # noqa: E402  (after the path set-up above, which never adds the source tree)


STATIC_RUNTIME = kiln._kiln.STATIC_RUNTIME


def pytest_collection_modifyitems(config, items):
    # G9: a static build has no libkiln.so.0 and no C++ SDK; tests of those are
    # skipped there (and reported as skipped), every other test still runs.
    if STATIC_RUNTIME:
        skip = pytest.mark.skip(reason="needs the shared runtime and C++ SDK (KILN_BUILD_SHARED=OFF build)")
        once = pytest.mark.skip(reason="does not depend on the installed build: runs in the shared-build pass")
        for item in items:
            if "shared_runtime" in item.keywords:
                item.add_marker(skip)
            elif "build_independent" in item.keywords:
                item.add_marker(once)
    else:
        skip = pytest.mark.skip(reason="checks the static (KILN_BUILD_SHARED=OFF) build")
        for item in items:
            if "static_runtime" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    # Tests run against the installed package: importing the source tree would
    # hide packaging mistakes.
    installed = Path(kiln.__file__).resolve()
    if REPO / "python" in installed.parents:
        raise pytest.UsageError(f"kiln was imported from the source tree ({installed}); install it first")


def _kernel_choices() -> list:
    """kiln.load options that pick each kernel path: the reference (portable)
    tier, and the optimized tier at every instruction-set level this CPU runs."""
    levels = {"avx512": ["avx512", "avx2", "baseline"], "avx2": ["avx2", "baseline"],
              "neon": ["neon", "baseline"]}.get(kiln.detected_isa(), ["baseline"])
    return [{"kernels": "portable"}] + [{"kernels": "optimized", "isa": isa} for isa in levels]


# For parametrize: ids like "portable", "optimized-avx2".
KERNEL_CHOICES = _kernel_choices()
KERNEL_CHOICE_IDS = ["-".join(c.values()) for c in KERNEL_CHOICES]


def clean_env(**extra) -> dict:
    """The environment without loader overrides, as a consumer would have it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LD_", "DYLD_")) and k not in ("PYTHONPATH",)}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def torch():
    """PyTorch, imported only by the tests that ask for it (the runtime never needs it)."""
    import torch

    return torch


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def exported(model_dir):
    """exported(name) -> (path, model, example_inputs, report); each model is exported once per session."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            import models
            from kiln.export import export

            model, inputs, kwargs = models.build(name)
            path = model_dir / f"{name}.kiln"
            report = export(model, inputs, path, **kwargs)
            cache[name] = (path, model, inputs, report)
        return cache[name]

    return get


def cmake_executable() -> str:
    exe = shutil.which("cmake", path=sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", ""))
    assert exe, "cmake is not installed (pip install cmake)"
    return exe


def build_cmake_project(source: Path, build: Path, *, cmake: str | None = None, generator: str = "Ninja",
                        defines: dict | None = None, env: dict | None = None,
                        targets: tuple = ()) -> subprocess.CompletedProcess:
    """Configure and build a CMake project (all of it, or only `targets`: the source tree's own builds
    take minutes on two cores); raises with the log on failure."""
    cmake = cmake or cmake_executable()
    env = env or clean_env()
    args = [cmake, "-S", str(source), "-B", str(build), "-G", generator, "-DCMAKE_BUILD_TYPE=Release"]
    if generator == "Ninja":
        ninja = shutil.which("ninja", path=sysconfig.get_path("scripts") + os.pathsep + env.get("PATH", ""))
        if ninja:
            args.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
    for k, v in (defines or {}).items():
        args.append(f"-D{k}={v}")
    for cmd in (args, [cmake, "--build", str(build), *(["--target", *targets] if targets else [])]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def assert_close(actual, expected, tol: float, what: str = "output") -> None:
    """G7: `actual` has `expected`'s shape and is within `tol` of the output's scale (its largest finite
    magnitude). A NaN must meet a NaN and an infinity the same infinity; a failure names the worst element."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, want {expected.shape}"
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    finite = np.isfinite(e)
    scale = max(float(np.abs(e[finite]).max(initial=0.0)), 1e-6)
    with np.errstate(invalid="ignore"):
        err = np.abs(a - e) / scale
    err[np.isnan(err)] = np.inf  # NaN against a number, or inf - inf...
    err[(a == e) | (np.isnan(a) & np.isnan(e))] = 0.0  # ...unless it is the same infinity, or NaN against NaN
    if err.size and err.max() > tol:
        at = np.unravel_index(int(err.argmax()), actual.shape)
        raise AssertionError(f"{what}: error {err.max():.3g} of the scale {scale:.3g} at {tuple(map(int, at))} "
                             f"(got {actual[at]}, want {expected[at]}), tolerance {tol:g}")


@pytest.fixture(scope="session")
def plugins(tmp_path_factory) -> Path:
    """tests/cpp/plugins built against the installed SDK: test plugin libraries (registrations, collisions, tiers)."""
    build = tmp_path_factory.mktemp("plugins")
    build_cmake_project(REPO / "tests" / "cpp" / "plugins", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build


@pytest.fixture(scope="session")
def llm_programs(tmp_path_factory):
    """llm_programs(name) -> path of a .kiln LLM program made from SmolLM2's GGUF by `kiln llm export`
    (once per session): "smollm2" the whole model in float32 (context 256, prefill chunks of 16),
    "tiny" its first 2 layers (context 64, chunks of 8; fast, its text means nothing), made
    through the command line; "tiny_gguf" the same with the export's default weights (the
    GGUF's own quantized blocks)."""
    cache: dict = {}
    directory = tmp_path_factory.mktemp("llm")

    def get(name: str) -> Path:
        if name not in cache:
            from zoo import smollm2

            gguf = smollm2.gguf_path()
            path = directory / f"{name}.kiln"
            if name == "smollm2":
                from kiln.llm.export import export_gguf

                export_gguf(gguf, path, dtype="float32", context=256, max_tokens_per_call=16)
            elif name in ("tiny", "tiny_gguf"):
                weights = ["--dtype", "float32"] if name == "tiny" else []
                proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", str(gguf), "-o", str(path),
                                       *weights, "--context", "64", "--max-tokens-per-call", "8",
                                       "--layers", "2"], capture_output=True, text=True, timeout=900)
                assert proc.returncode == 0, proc.stdout + proc.stderr
                assert f"weights {'float32' if weights else 'gguf '}" in proc.stdout
                assert "context 64, up to 8 tokens per call" in proc.stdout
            else:
                raise KeyError(name)
            cache[name] = path
        return cache[name]

    return get
