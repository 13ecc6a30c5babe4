"""Shared fixtures: the installed package, exported test models (cached per session), C++ builds."""

from __future__ import annotations

import contextlib
import fcntl
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


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=os.environ.get("KILN_TEST_TIER") == "full",
                     help="also run the full tier (tests marked `full`: whole sanitizer, qemu and fuzz runs, "
                          "sweeps); scripts/test.sh --full sets it (KILN_TEST_TIER=full)")


WHOLE_LLM_FIXTURES = {"smollm2", "smol"}  # tests/test_llm.py, tests/test_quantized.py, tests/test_zoo.py


def full_tier(config) -> bool:
    return bool(config.getoption("--full"))


def pytest_collection_modifyitems(config, items):
    # The default tier is what a user and CI run; the `full` tests are the long
    # runs a fast subset stands for there (docs/developing.md lists them).
    if not full_tier(config):
        later = pytest.mark.skip(reason="full tier: scripts/test.sh --full (or pytest --full)")
        for item in items:
            if item.get_closest_marker("full") is not None:
                item.add_marker(later)
    # Tests of the whole SmolLM2 program (an export of a minute or more) are marked `whole_llm`, so
    # that the static pass's default tier can leave them to the shared pass (scripts/test_static.sh).
    for item in items:
        if WHOLE_LLM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.whole_llm)
    # The static build (KILN_BUILD_SHARED=OFF, docs/architecture.md) has no libkiln.so.0
    # and no C++ SDK; tests of those are skipped there (and reported as skipped), every other test still runs.
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
    tier, and the optimized tier at every instruction-set level this CPU runs
    (highest first). Both lists come from the runtime."""
    tiers = sorted(kiln.kernel_tiers(), key=kiln.kernel_tiers().get)  # the reference tier first
    levels = list(reversed(kiln.supported_isas()))
    return [{"kernels": tiers[0]}] + [{"kernels": t, "isa": isa} for t in tiers[1:] for isa in levels]


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
            from kiln.export import export

            import models

            model, inputs, kwargs = models.build(name)
            path = model_dir / f"{name}.kiln"
            report = export(model, inputs, path, **kwargs)
            cache[name] = (path, model, inputs, report)
        return cache[name]

    return get


CCACHE_CONFIG = REPO / "build" / "ccache" / "ccache.conf"  # written by scripts/setup.sh

# The instruction-set levels the sanitized builds compile (KILN_ISA_LEVELS_BUILT): the clang fuzz/ASan
# build and the TSan build check the runtime and the operator code, which every level shares; each
# level's microkernels are checked against the reference by the kernel harness (test_kernel_tiers.py,
# every level of this CPU, and under GCC's ASan in the full tier). Every level would triple their cost.
SANITIZED_LEVELS = "baseline"
# The clang fuzz/ASan build's optimization (scripts/fuzz.py): -O0 compiles it in a quarter of -O1's time;
# the tests fuzz for seconds, and ASan and UBSan report the same errors at either level.
SANITIZED_OPTIMIZE = "-O0"


def with_ccache(env: dict) -> tuple:
    """(env, CMake arguments) that compile the source tree through scripts/setup.sh's cache, where it is:
    the source tree's own builds with the wheel's flags (the kernel harness, the extension prefix)
    reuse the wheel's objects, and every rerun reuses its own."""
    if CCACHE_CONFIG.exists() and shutil.which("ccache"):
        return {**env, "CCACHE_DIR": str(CCACHE_CONFIG.parent)}, ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    return env, []


def load_script(name: str):
    """scripts/<name>.py as a module (scripts/fuzz.py builds and runs the fuzz targets)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kiln_script_{name}", REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    if source == REPO:
        env, launcher = with_ccache(env)
        args += launcher
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


def export_embedding_and_linear(qw, rows: int, path) -> None:
    """A program forward(idx i64[N], x f32[rows, K]) -> (embedding(idx), linear(x)) over one
    kiln.export.quantize.QuantizedWeight [N, K] (both kiln_quantized operators on one weight)."""
    import torch

    from kiln.export import export
    from kiln.export.quantize import QuantizedEmbedding, QuantizedLinear

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.lin = QuantizedEmbedding(qw), QuantizedLinear(qw)

        def forward(self, idx, x):
            return self.emb(idx), self.lin(x)

    n, k = qw.shape
    export(Both(), (torch.arange(n), torch.zeros(rows, k)), path)


def assert_close(actual, expected, tol: float, what: str = "output", *, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """`actual` has `expected`'s shape and every element is within both tolerances of its reference:
    the absolute one of the guarantee, `tol` times the output's scale (its largest finite magnitude),
    and a relative one of its own, |actual - expected| <= atol + rtol * |expected| (by default
    rtol = tol and atol = tol / 16 of the scale), so that small elements cannot be wrong by as much as
    the largest one may. A NaN must meet a NaN and an infinity the same infinity; a failure names the
    worst element and the bound it broke."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, want {expected.shape}"
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    finite = np.isfinite(e)
    scale = max(float(np.abs(e[finite]).max(initial=0.0)), 1e-6)
    rtol = tol if rtol is None else rtol
    atol = tol * scale / 16 if atol is None else atol
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - e)
    diff[np.isnan(diff)] = np.inf  # NaN against a number, or inf - inf...
    diff[(a == e) | (np.isnan(a) & np.isnan(e))] = 0.0  # ...unless it is the same infinity, or NaN against NaN
    with np.errstate(invalid="ignore"):
        relative = np.where(np.isfinite(e), atol + rtol * np.abs(e), 0.0)  # an infinity must be met exactly
    for bound, name in ((np.full_like(diff, tol * scale), f"tolerance {tol:g} of the scale {scale:.3g}"),
                        (relative, f"atol {atol:.3g} + rtol {rtol:g} x |expected|")):
        with np.errstate(invalid="ignore", divide="ignore"):
            excess = np.where(diff > bound, diff / np.maximum(bound, 1e-300), 0.0)
        if excess.size and excess.max() > 0:
            at = np.unravel_index(int(excess.argmax()), actual.shape)
            raise AssertionError(f"{what}: error {diff[excess.argmax()]:.3g} at {tuple(map(int, at))} "
                                 f"(got {actual[at]}, want {expected[at]}) exceeds {name}")


@pytest.fixture(scope="session")
def plugins(tmp_path_factory) -> Path:
    """tests/cpp/plugins built against the installed SDK: test plugin libraries (registrations, collisions, tiers)."""
    build = tmp_path_factory.mktemp("plugins")
    build_cmake_project(REPO / "tests" / "cpp" / "plugins", build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    return build


TINY_SLOTS = 8  # KV cache slots of llm_programs("tiny") and ("tiny_gguf")


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def llm_programs(tmp_path_factory):
    """llm_programs(name) -> path of a .kiln LLM program made from SmolLM2's GGUF by `kiln llm export`
    (once per session): "smollm2" the whole model in float32 (context 256, prefill chunks of 16),
    "tiny" its first 2 layers (context 64, chunks of 8, 8 KV cache slots; fast, its text means
    nothing), made through the command line; "tiny_gguf" the same with the export's default
    weights (the GGUF's own quantized blocks). scripts/test.sh gives its three pytest processes one
    directory for them (KILN_TEST_SHARED_FIXTURES, new for each run): the first to need a program
    exports it, under a lock, and the others read that file."""
    shared = os.environ.get("KILN_TEST_SHARED_FIXTURES")
    directory = Path(shared) if shared else tmp_path_factory.mktemp("llm")
    directory.mkdir(parents=True, exist_ok=True)

    def get(name: str) -> Path:
        if name not in ("smollm2", "tiny", "tiny_gguf"):
            raise KeyError(name)
        path = directory / f"{name}.kiln"
        with _locked(directory / f"{name}.lock"):
            if not path.exists():
                partial = directory / f"{name}.partial.kiln"
                _export_llm_program(name, partial)
                os.replace(partial, path)
        return path

    return get


def _export_llm_program(name: str, path: Path) -> None:
    from zoo import smollm2

    gguf = smollm2.gguf_path()
    if name == "smollm2":
        from kiln.llm.export import export_gguf

        export_gguf(gguf, path, dtype="float32", context=256, max_tokens_per_call=16)
        return
    weights = ["--dtype", "float32"] if name == "tiny" else []
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", str(gguf), "-o", str(path), *weights,
                           "--context", "64", "--max-tokens-per-call", "8", "--slots", str(TINY_SLOTS),
                           "--layers", "2"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"weights {'float32' if weights else 'gguf '}" in proc.stdout
    assert "context 64, up to 8 tokens per call" in proc.stdout
