"""Bad input under AddressSanitizer and UBSan, threads under ThreadSanitizer: a corpus of corrupt
programs, the kernels' own checks and concurrent calls run in C++ programs built from this source
tree with sanitizers. A Python test sees a crash; only a sanitizer sees an out-of-bounds read that
happens not to crash, or a race that happens to give the right answer. A canary program with a
deliberate error of each kind shows that the sanitizers are there.

The default tier takes its ASan/UBSan programs from the clang build that tests/test_fuzz.py makes
anyway (KILN_SANITIZE=fuzzer instruments everything with ASan and UBSan too; programs other than
the fuzz targets link without libFuzzer); the full tier builds them with GCC as well, with the
kernel harness (docs/developing.md).
"""

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, SANITIZED_LEVELS, SANITIZED_OPTIMIZE, build_cmake_project, clean_env, full_tier, load_script

BUILD = REPO / "build" / "sanitize"  # kept between runs: the sanitized build takes minutes
pytestmark = pytest.mark.build_independent
HEADER = struct.Struct("<8sIIQQQQQ8x")
PROGRAMS = ("sanitizer_canary", "run_programs", "c_api_bad_input")


def gcc_sanitized() -> Path:
    build_cmake_project(REPO, BUILD, defines={
        "KILN_BUILD_PYTHON": "OFF", "KILN_BUILD_SHARED": "OFF", "KILN_BUILD_TESTS": "ON",
        "KILN_SANITIZE": "ON", "CMAKE_BUILD_TYPE": "None", "CMAKE_CXX_FLAGS": "-O1 -g1"},
        targets=(*PROGRAMS, "kernel_tiers_test"))
    return BUILD / "tests" / "cpp"


@pytest.fixture(scope="module", params=["clang", "gcc"])
def sanitized(request) -> Path:
    """The ASan/UBSan programs: from the fuzz build (clang), and in the full tier from GCC's too."""
    if request.param == "gcc":
        if not full_tier(request.config):
            pytest.skip("full tier: scripts/test.sh --full (or pytest --full)")
        return gcc_sanitized()
    if shutil.which("clang++-19") is None and shutil.which("clang++") is None:
        return gcc_sanitized()  # no clang here: GCC's build is the only one
    return load_script("fuzz").build(REPO / "build" / "fuzz", list(PROGRAMS), levels=SANITIZED_LEVELS,
                                     optimize=SANITIZED_OPTIMIZE)


def sanitizer_env():
    # One exit code for both: clang links ASan and UBSan into one runtime, whose common flags
    # (exitcode among them) are read from both variables; the report text tells them apart.
    return clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=70",
                     UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=70")


@pytest.mark.parametrize("mode, report, exitcode", [
    ("heap-overflow", "ERROR: AddressSanitizer: heap-buffer-overflow", 70),
    ("signed-overflow", "runtime error: signed integer overflow", 70),
], ids=["asan", "ubsan"])
def test_a_deliberate_error_is_reported(sanitized, mode, report, exitcode):
    """The positive control: without it, an uninstrumented build would pass every test here."""
    proc = subprocess.run([str(sanitized / "sanitizer_canary"), mode], capture_output=True, text=True,
                          env=sanitizer_env(), timeout=60)
    assert proc.returncode == exitcode and report in proc.stderr, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"


def test_the_programs_are_instrumented(sanitized):
    # The canary's build options, checked on the programs themselves: they call into both runtimes.
    symbols = subprocess.run(["nm", str(sanitized / "run_programs")], capture_output=True, text=True,
                             check=True).stdout
    assert "__asan_report_load" in symbols and "__ubsan_handle_" in symbols


@pytest.mark.full
def test_the_kernel_harness_is_instrumented():
    symbols = subprocess.run(["nm", str(gcc_sanitized() / "kernel_tiers_test")], capture_output=True, text=True,
                             check=True).stdout
    assert "__asan_report_load" in symbols and "__ubsan_handle_" in symbols


@pytest.mark.full
def test_kernel_checks():
    """The kernel harness under ASan and UBSan: every portable kernel against its naive reference and
    the hostile arguments it must refuse, every optimized kernel against it at every ISA level."""
    sanitized = gcc_sanitized()
    proc = subprocess.run([str(sanitized / "kernel_tiers_test")], capture_output=True, text=True,
                          env=sanitizer_env(), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert proc.stdout.splitlines()[-1].endswith(", 0 failures")


@pytest.fixture(scope="module")
def thread_sanitized() -> Path:
    clang = shutil.which("clang++-19")
    if clang is None:
        pytest.skip("ThreadSanitizer needs clang++-19 (Debian clang-19 and libclang-rt-19-dev; scripts/setup.sh "
                    "installs them when it runs as root)")
    build_cmake_project(REPO, REPO / "build" / "tsan", defines={
        "KILN_BUILD_PYTHON": "OFF", "KILN_BUILD_SHARED": "OFF", "KILN_BUILD_TESTS": "ON",
        "KILN_SANITIZE": "thread", "CMAKE_BUILD_TYPE": "None", "CMAKE_CXX_FLAGS": "-O1 -gline-tables-only",
        "KILN_ISA_LEVELS_BUILT": SANITIZED_LEVELS,
        "CMAKE_CXX_COMPILER": clang}, targets=("sanitizer_canary", "concurrent_methods", "shared_method",
                                                "shared_runner", "shared_batch", "c_api_threads"))
    return REPO / "build" / "tsan" / "tests" / "cpp"


TSAN_ENV = {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66"}


def test_a_deliberate_race_is_reported(thread_sanitized):
    """The positive control of the ThreadSanitizer tests: two threads write one int without a lock."""
    proc = subprocess.run([str(thread_sanitized / "sanitizer_canary"), "data-race"], capture_output=True,
                          text=True, env=clean_env(**TSAN_ENV), timeout=120)
    assert proc.returncode == 66 and "WARNING: ThreadSanitizer: data race" in proc.stderr, \
        f"exit {proc.returncode}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("program", ["concurrent_methods", "shared_method"])
def test_the_thread_programs_are_instrumented(thread_sanitized, program):
    symbols = subprocess.run(["nm", str(thread_sanitized / program)], capture_output=True, text=True,
                             check=True).stdout
    assert "__tsan_read" in symbols and "__tsan_func_entry" in symbols


@pytest.mark.parametrize("name", ["cnn", "encoder"])
def test_methods_run_concurrently_under_tsan(thread_sanitized, exported, name):
    """Three Methods of one Program on three threads (sharing its packed weights and
    the pool) while a fourth thread resizes the pool: same results as alone, and
    ThreadSanitizer reports nothing."""
    proc = subprocess.run([str(thread_sanitized / "concurrent_methods"), str(exported(name)[0]), "8"],
                          capture_output=True, text=True, timeout=900, env=clean_env(**TSAN_ENV))
    assert proc.returncode == 0 and "ThreadSanitizer" not in proc.stderr, proc.stdout + proc.stderr[-6000:]
    assert "0 mismatches, 0 errors" in proc.stdout


@pytest.mark.parametrize("name", ["encoder", "mlp_dynamic_batch"])
def test_one_method_shared_by_threads_under_tsan(thread_sanitized, exported, name):
    """One Method, four threads taking turns with their own inputs (their own
    batch sizes for mlp_dynamic_batch), plus a thread calling execute() without
    the turn (it runs or is refused with Busy) and one resetting state: every
    caller reads its own outputs and ThreadSanitizer reports nothing."""
    proc = subprocess.run([str(thread_sanitized / "shared_method"), str(exported(name)[0]), "8"],
                          capture_output=True, text=True, timeout=900, env=clean_env(**TSAN_ENV))
    assert proc.returncode == 0 and "ThreadSanitizer" not in proc.stderr, proc.stdout + proc.stderr[-6000:]
    assert "0 mismatches, 0 errors" in proc.stdout


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_one_c_api_method_shared_by_threads_under_tsan(thread_sanitized, exported, name):
    """tests/cpp/threads/c_api_threads.c: four threads share one kiln_method through the C API,
    each with its own inputs, outputs and error statuses, while the program loads methods for
    them: every thread reads its own results and messages, and ThreadSanitizer reports nothing."""
    proc = subprocess.run([str(thread_sanitized / "c_api_threads"), str(exported(name)[0]), "20"],
                          capture_output=True, text=True, timeout=900, env=clean_env(**TSAN_ENV))
    assert proc.returncode == 0 and "ThreadSanitizer" not in proc.stderr, proc.stdout + proc.stderr[-6000:]
    assert "80 calls, 0 mismatches, 0 errors" in proc.stdout


def test_one_llm_runner_shared_by_threads_under_tsan(request, thread_sanitized, llm_programs, exported):
    """One kiln::llm::Runner and one Method shared by 8 threads for 2,000 calls (600 outside the
    full tier, where about 100 streams are superseded and 8 generations cancelled): generations
    holding the Runner, without it (run or Busy; a call from its own callback is refused),
    pull-style streams superseded between steps, cancel() and reset() at random. Every answer
    equals the one computed alone (a prefix when cancelled or superseded) and ThreadSanitizer
    reports nothing."""
    calls = 2000 if full_tier(request.config) else 600
    proc = subprocess.run([str(thread_sanitized / "shared_runner"), str(llm_programs("tiny")),
                           str(exported("mlp")[0]), str(calls)],
                          capture_output=True, text=True, timeout=1800,
                          env=clean_env(TSAN_OPTIONS="halt_on_error=1:exitcode=66"))
    assert proc.returncode == 0 and "ThreadSanitizer" not in proc.stderr, proc.stdout + proc.stderr[-6000:]
    assert f"{calls} calls" in proc.stdout and "0 mismatches, 0 errors" in proc.stdout, proc.stdout
    assert " 0 superseded" not in proc.stdout and " 0 cancelled" not in proc.stdout, proc.stdout  # both happened


def test_one_batch_runner_shared_by_threads_under_tsan(request, thread_sanitized, llm_programs):
    """One kiln::llm::BatchRunner: a worker stepping while 8 client threads submit 64 requests
    (256 in the full tier) and cancel a quarter at random, before or after they start. Every
    answer equals the prompt's alone (a prefix when cancelled), no request is left over, and
    ThreadSanitizer reports nothing."""
    requests = 256 if full_tier(request.config) else 64
    proc = subprocess.run([str(thread_sanitized / "shared_batch"), str(llm_programs("tiny")), str(requests)],
                          capture_output=True, text=True, timeout=1800,
                          env=clean_env(TSAN_OPTIONS="halt_on_error=1:exitcode=66"))
    assert proc.returncode == 0 and "ThreadSanitizer" not in proc.stderr, proc.stdout + proc.stderr[-6000:]
    assert f"{requests} requests" in proc.stdout and "0 mismatches, 0 errors, every slot free" in proc.stdout
    assert " 0 cancelled" not in proc.stdout, proc.stdout


def corrupt_corpus(base: bytes, seed: int, flips: int, out: Path) -> list:
    rng = random.Random(seed)
    structure_end = HEADER.unpack_from(base)[5]
    files = []
    for i in range(flips):
        data = bytearray(base)
        limit = structure_end if i % 5 else len(data)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(limit)] ^= rng.randrange(1, 256)
        files.append(data)
    for n in range(0, len(base), max(1, len(base) // 100)):
        files.append(base[:n])
    paths = []
    for i, data in enumerate(files):
        p = out / f"{seed}-{i}.kiln"
        p.write_bytes(bytes(data))
        paths.append(p)
    return paths


def run_programs(binary: Path, paths: list) -> dict:
    outcomes = {}
    for start in range(0, len(paths), 400):
        chunk = [str(p) for p in paths[start:start + 400]]
        proc = subprocess.run([str(binary), *chunk], capture_output=True, text=True, env=sanitizer_env(),
                              timeout=900)
        assert proc.returncode == 0 and "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, \
            proc.stdout[-1000:] + proc.stderr[-6000:]
        lines = proc.stdout.splitlines()
        assert len(lines) == len(chunk)
        for line in lines:
            outcome = line.rsplit(" ", 1)[1]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def test_valid_programs_run_clean(sanitized, exported):
    paths = [exported(name)[0] for name in ("mlp", "cnn", "encoder", "tied", "two_methods", "dynamic_state")]
    assert run_programs(sanitized / "run_programs", paths) == {"ran": len(paths)}


@pytest.mark.parametrize("name", ["mlp", "dynamic_state"])
def test_bad_input_through_the_c_api_under_sanitizers(request, sanitized, exported, name):
    """tests/cpp/c_api_bad_input.c: null, wrong-kind and freed handles, wrong counts, sizes and dtypes,
    short output buffers and truncated and corrupted copies through the C API give their statuses,
    and ASan and UBSan report nothing."""
    copies = 1000 if full_tier(request.config) else 200
    proc = subprocess.run([str(sanitized / "c_api_bad_input"), str(exported(name)[0]), str(copies)],
                          capture_output=True, text=True, env=sanitizer_env(), timeout=900)
    assert proc.returncode == 0 and "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, \
        proc.stdout[-3000:] + proc.stderr[-6000:]
    assert f"{copies} corrupted copies: " in proc.stdout and ", 0 unexpected" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["cnn", "encoder", "dynamic_state"])
def test_corrupt_programs_under_sanitizers(request, sanitized, exported, tmp_path, name):
    base = exported(name)[0].read_bytes()
    flips = 1500 if full_tier(request.config) else 300  # a fifth of the corpus by default
    paths = corrupt_corpus(base, seed=len(name), flips=flips, out=tmp_path)
    outcomes = run_programs(sanitized / "run_programs", paths)
    print(name, outcomes)
    assert sum(outcomes.values()) == len(paths)
    assert outcomes.get("invalid_program", 0) > len(paths) // 2
