"""Typed errors, never crashes, under libFuzzer (docs/fuzzing.md): the fuzz targets of
tests/cpp/fuzz (loader and verifier, method load, runs on fuzzed inputs; the LLM extension's GGUF reader,
tokenizer.json reader and Runner::load's metadata checks), built with clang and
-fsanitize=fuzzer,address,undefined by scripts/fuzz.py.

Here each target fuzzes for a few seconds from seeds made of the test models
(for the LLM targets, SmolLM2's GGUF cut down, and its tokenizer.json) and from
the committed regression files (tests/cpp/fuzz/regressions/<target>:
every crash a fuzz run found, fixed; libFuzzer runs each of them first); any
crash, sanitizer report or hang fails. The long runs are done by hand with
scripts/fuzz.py (docs/fuzzing.md). fuzz_canary, a deliberate bug, must be
found: without it a harness that never reports would pass.
"""

import shutil
import subprocess

import pytest

import kiln

from conftest import REPO, SANITIZED_LEVELS, SANITIZED_OPTIMIZE, load_script

pytestmark = pytest.mark.build_independent
SECONDS = {"fuzz_load": 4, "fuzz_method": 4, "fuzz_run": 8, "fuzz_packed_cache": 3,
           "fuzz_gguf": 4, "fuzz_tokenizer_json": 4,
           "fuzz_llm_metadata": 4}
SEED_MODELS = ["mlp", "encoder", "tied", "two_methods", "dynamic_state", "mlp_dynamic_batch"]


fuzz = load_script("fuzz")


@pytest.fixture(scope="module")
def fuzzers():
    if shutil.which("clang++-19") is None and shutil.which("clang++") is None:
        pytest.skip("libFuzzer needs clang (Debian clang-19 and libclang-rt-19-dev; scripts/setup.sh installs them "
                    "when it runs as root)")
    return fuzz.build(REPO / "build" / "fuzz", fuzz.TARGETS + ["fuzz_canary", "fuzz_memory_canary"],
                      levels=SANITIZED_LEVELS, optimize=SANITIZED_OPTIMIZE)


@pytest.fixture(scope="module")
def seeds(exported, tmp_path_factory):
    programs = [exported(name)[0] for name in SEED_MODELS]
    out = tmp_path_factory.mktemp("fuzz_seeds")
    fuzz.make_seeds(programs, out)
    fuzz.make_llm_seeds(out)
    return out


@pytest.mark.parametrize("target", fuzz.TARGETS)
def test_bounded_fuzz_run_finds_nothing(fuzzers, seeds, tmp_path, target):
    r = fuzz.fuzz(fuzzers, target, SECONDS[target], tmp_path / "corpus", seeds / target, tmp_path / "artifacts", [])
    log = (tmp_path / f"{target}.log").read_text()
    assert r["returncode"] == 0 and not r["crashes"], log[-6000:]
    assert r["execs"] > 0 and r["cov"] > 0, log[-3000:]
    print(target, r)


def test_the_canary_is_found(fuzzers, tmp_path):
    r = fuzz.fuzz(fuzzers, "fuzz_canary", 120, tmp_path / "corpus", tmp_path / "none", tmp_path / "artifacts", [])
    log = (tmp_path / "fuzz_canary.log").read_text()
    assert r["returncode"] != 0 and len(r["crashes"]) == 1, log[-3000:]
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in log


def test_the_memory_bound_is_enforced(fuzzers, tmp_path):
    """The LLM targets' bound (64x the input on the heap, fuzz_memory_bound.h) reports an input
    that holds more, even in small blocks that libFuzzer's own limits would let through."""
    r = fuzz.fuzz(fuzzers, "fuzz_memory_canary", 120, tmp_path / "corpus", tmp_path / "none", tmp_path / "artifacts",
                  [])
    log = (tmp_path / "fuzz_memory_canary.log").read_text()
    assert r["returncode"] != 0 and len(r["crashes"]) == 1, log[-3000:]
    assert "the input made kiln hold more than 64x its size" in log


def test_the_sanitized_build_compiles_only_its_levels(fuzzers):
    """KILN_ISA_LEVELS_BUILT: the fuzz build holds the microkernels of SANITIZED_LEVELS and of no
    other level of the wheel (which has them all), so the cut the tests rely on for time is real."""
    symbols = subprocess.run(["nm", "-C", str(fuzzers / "fuzz_run")], capture_output=True, text=True,
                             check=True).stdout
    built = SANITIZED_LEVELS.split(";")
    assert len(kiln.isa_levels()) > len(built)  # the wheel's build compiled more
    for level in kiln.isa_levels():
        assert (f"kernels::optimized::{level}::" in symbols) == (level in built), level


@pytest.mark.parametrize("levels, message", [
    ("avx2", "must hold baseline"), ("baseline;no_such_level", "'no_such_level' is not a level")])
def test_a_bad_list_of_levels_is_refused_at_configure(tmp_path, levels, message):
    proc = subprocess.run([fuzz._tool("cmake"), "-S", str(REPO), "-B", str(tmp_path / "build"), "-G", "Ninja",
                           f"-DCMAKE_MAKE_PROGRAM={fuzz._tool('ninja')}", "-DKILN_BUILD_PYTHON=OFF",
                           f"-DKILN_ISA_LEVELS_BUILT={levels}"], capture_output=True, text=True)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-3000:]
