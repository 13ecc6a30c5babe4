"""Kernel tiers (docs/kernels.md): the highest tier whose prepare accepts an instruction serves it,
the reference (portable) tier can be forced, the instruction-set level can be lowered,
and every optimized kernel matches its reference at every level (the C++ harness).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import REPO, build_cmake_project, clean_env, full_tier
from program_builder import single_op_program

PORTABLE, OPTIMIZED = 0, 100


def relu_program(tmp_path: Path, n: int = 4) -> Path:
    path = tmp_path / f"relu{n}.kiln"
    single_op_program(path, "aten::relu", n=n)
    return path


def served_tiers(method) -> list:
    return [(i.op, i.tier) for i in method.instructions if i.kind == "kernel"]


def run_python(code: str, **env) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=clean_env(**env), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_optimized_tier_serves_by_default_and_the_reference_can_be_forced(tmp_path):
    path = relu_program(tmp_path)
    x = np.array([-1.0, 2.0, np.nan, -0.5], dtype=np.float32)
    fast = kiln.load(path).method()
    reference = kiln.load(path, kernels="portable").method()
    assert served_tiers(fast) == [("aten::relu.default", OPTIMIZED)]
    assert served_tiers(reference) == [("aten::relu.default", PORTABLE)]
    assert all(os.path.basename(i.library) == os.path.basename(kiln.runtime_library_path())
               for i in fast.instructions)
    np.testing.assert_array_equal(fast(x)[0], reference(x)[0])
    # The environment variable does the same for programs loaded without the option.
    out = run_python(f"""
        import kiln
        print([i.tier for i in kiln.load({str(path)!r}).method().instructions])
    """, KILN_KERNELS="portable")
    assert out.strip() == "[0]"


def test_isa_can_be_lowered_and_bad_values_are_refused(tmp_path):
    path = relu_program(tmp_path)
    assert kiln.load(path).method().isa == kiln.detected_isa()
    assert kiln.load(path, isa="baseline").method().isa == "baseline"
    out = run_python(f"""
        import kiln
        print(kiln.load({str(path)!r}).method().isa)
    """, KILN_ISA="baseline")
    assert out.strip() == "baseline"
    with pytest.raises(kiln.InvalidArgument, match="LoadOptions::isa is 'sse9'"):
        kiln.load(path, isa="sse9")
    with pytest.raises(kiln.InvalidArgument,
                       match="LoadOptions::kernels is 'fastest'; expected 'optimized' or 'portable'"):
        kiln.load(path, kernels="fastest")
    foreign = "neon" if kiln.detected_isa() != "neon" else "avx2"
    with pytest.raises(kiln.InvalidArgument, match=f"'{foreign}', which is not an instruction set of this CPU"):
        kiln.load(path, isa=foreign)


def _cpuinfo_flags() -> set:
    """The flags line of /proc/cpuinfo: Linux's own reading of CPUID and XCR0, independent of kiln."""
    with open("/proc/cpuinfo") as f:
        line = next((l for l in f if l.startswith(("flags", "Features"))), "")
    return set(line.split(":", 1)[-1].split())


def test_cpu_features_are_detected_as_linux_sees_them():
    names = kiln.cpu_feature_names()
    have = kiln.cpu_features()
    assert len(names) == len(set(names)) and set(have) <= set(names)
    assert [f for f in names if f in have] == have  # list order
    if os.uname().machine == "x86_64":
        # kiln's names are /proc/cpuinfo's: every one the kernel reports must agree both ways.
        flags = _cpuinfo_flags()
        assert {f for f in names if f in flags} == set(have), (sorted(flags & set(names)), have)
        assert "sse2" in have
    elif os.uname().machine == "aarch64":
        assert "neon" in have


def test_levels_are_sets_of_features():
    levels = kiln.isa_levels()
    assert levels[0] == "baseline" and len(levels) == len(set(levels))
    assert kiln.isa_features("baseline") == []
    have = set(kiln.cpu_features())
    runnable = [level for level in levels if set(kiln.isa_features(level)) <= have]
    assert kiln.supported_isas() == runnable
    assert kiln.detected_isa() == runnable[-1]
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "f16c"} <= have:
        assert "avx512" in kiln.supported_isas()
    with pytest.raises(kiln.InvalidArgument, match="'sse9' is not an instruction-set level of this architecture"):
        kiln.isa_features("sse9")
    with pytest.raises(kiln.InvalidArgument, match="isa_features takes a level name, not int"):
        kiln.isa_features(3)


def test_every_level_can_be_forced_and_the_error_lists_the_runtimes_levels(tmp_path):
    path = relu_program(tmp_path)
    x = np.array([-1.0, 2.0, -3.0, 4.0], dtype=np.float32)
    for level in kiln.supported_isas():
        method = kiln.load(path, isa=level).method()
        assert method.isa == level
        assert method(x)[0].tolist() == [0.0, 2.0, 0.0, 4.0]
    # A level above the CPU's is lowered to the best one whose features remain.
    for level in set(kiln.isa_levels()) - set(kiln.supported_isas()):
        assert kiln.load(path, isa=level).method().isa in kiln.supported_isas()
    levels = kiln.isa_levels()
    spelled = ", ".join(f"'{level}'" for level in levels[:-1]) + f" or '{levels[-1]}'"
    with pytest.raises(kiln.InvalidArgument, match=f"KILN_ISA is 'sse9'; expected {spelled}$"):
        run_python_raising(path, KILN_ISA="sse9")


def run_python_raising(path: Path, **env):
    """kiln.load in a child process with `env`; re-raises the child's kiln error here."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import kiln
        try:
            kiln.load({str(path)!r}).method()
        except kiln.KilnError as e:
            print(type(e).__name__, e, sep="\\n")
    """)], capture_output=True, text=True, env=clean_env(**env), timeout=120)
    assert proc.returncode == 0, proc.stderr
    kind, _, message = proc.stdout.rstrip("\n").partition("\n")
    if kind:
        raise getattr(kiln, kind)(message)


def test_kernel_tiers_are_named_once():
    assert kiln.kernel_tiers() == {"portable": PORTABLE, "optimized": OPTIMIZED}
    assert kiln.kernel_tier_name(PORTABLE) == "portable" and kiln.kernel_tier_name(200) == "tier 200"


def test_doctor_shows_the_cpu_features_and_levels():
    proc = subprocess.run([sys.executable, "-m", "kiln", "doctor"], capture_output=True, text=True,
                          env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"cpu features: {' '.join(kiln.cpu_features())}\n" in proc.stdout
    for level in kiln.isa_levels():
        runs = level in kiln.supported_isas()
        assert (f"  level {level}: runs here" in proc.stdout) == runs, proc.stdout


@pytest.mark.shared_runtime
def test_a_plugin_tier_above_serves_what_its_prepare_accepts(plugins, tmp_path):
    even, odd = relu_program(tmp_path, 4), relu_program(tmp_path, 3)
    out = run_python(f"""
        import numpy as np, os, kiln
        kiln.load_library({str(plugins / 'libtier_above.so')!r})
        for path in ({str(even)!r}, {str(odd)!r}):
            for kernels in ("", "portable"):
                m = kiln.load(path, kernels=kernels).method()
                x = np.arange(m.input_specs[0].shape[0], dtype=np.float32) - 1
                info = m.instructions[0]
                print(os.path.basename(path), kernels or "default", info.tier,
                      os.path.basename(info.library), m(x)[0].tolist())
    """)
    assert out.splitlines() == [
        "relu4.kiln default 200 libtier_above.so [1000.0, 1000.0, 1001.0, 1002.0]",
        "relu4.kiln portable 0 libkiln.so.0 [0.0, 0.0, 1.0, 2.0]",
        # Declined by the plugin's prepare: the next tier (the runtime's optimized relu) serves it.
        "relu3.kiln default 100 libkiln.so.0 [0.0, 0.0, 1.0]",
        "relu3.kiln portable 0 libkiln.so.0 [0.0, 0.0, 1.0]",
    ]


@pytest.mark.shared_runtime
def test_two_kernels_of_one_tier_collide(plugins, tmp_path):
    path = relu_program(tmp_path)
    out = run_python(f"""
        import numpy as np, kiln
        try:
            kiln.load_library({str(plugins / 'libtier_clash.so')!r})
        except kiln.RegistrationError as e:
            print("ERROR:", e)
        print("RESULT:", kiln.load({str(path)!r}).forward(np.array([-1, 2, -3, 4], dtype=np.float32))[0].tolist())
    """)
    error = next(line for line in out.splitlines() if line.startswith("ERROR:"))
    assert "kernel aten::relu.default [f32] at tier 100" in error
    assert "libtier_clash.so" in error and "libkiln.so.0" in error
    assert "RESULT: [0.0, 2.0, 0.0, 4.0]" in out  # the first registration (the runtime's) stays


def test_inspect_names_the_tier_of_each_instruction(tmp_path):
    path = relu_program(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kiln", "inspect", str(path), "--instructions"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"kernels (isa {kiln.detected_isa()}, gemm precision float32):" in proc.stdout
    assert "0 aten::relu.default: optimized" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "kiln", "inspect", str(path), "--kernels", "portable"],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    assert "1 x aten::relu.default: portable" in proc.stdout


@pytest.mark.build_independent
def test_optimized_kernels_match_the_reference_at_every_isa_level():
    """tests/cpp/kernels, built from this source tree with the release flags of the wheel."""
    build = REPO / "build" / "kernel-tests"  # kept between runs: a full build takes minutes
    build_cmake_project(REPO, build, defines={"KILN_BUILD_PYTHON": "OFF", "KILN_BUILD_TESTS": "ON"},
                        targets=("kernel_tiers_test",))
    proc = subprocess.run([str(build / "tests" / "cpp" / "kernel_tiers_test")], capture_output=True, text=True,
                          env=clean_env(), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    summary = proc.stdout.splitlines()[-1]
    assert summary.endswith(", 0 failures"), summary
    # The tables of every level this CPU's features allow really ran (and no others): a dispatch
    # that fell back to baseline would compare baseline with itself and pass the line above.
    have = set(kiln.cpu_features())
    expected = [level for level in kiln.isa_levels() if set(kiln.isa_features(level)) <= have]
    dispatched = next(line for line in proc.stdout.splitlines() if line.startswith("levels dispatched:"))
    assert dispatched.split(":", 1)[1].split() == expected, dispatched
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= _cpuinfo_flags():
        assert "avx512" in expected


@pytest.mark.build_independent
def test_neon_kernels_match_the_reference_under_qemu(request):
    """The aarch64 build (NEON level) cross-compiled here and run under qemu-user. Emulation makes
    this the costliest test, so the default tier runs on one pool thread and leaves out the sweeps
    that take 85% of the emulated time (the row-exactness sweeps and the float64 error scan: both
    run natively at every x86 level); the full tier runs every case on one and two threads."""
    import shutil

    missing = [tool for tool in ("aarch64-linux-gnu-g++", "qemu-aarch64") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (Debian g++-aarch64-linux-gnu and qemu-user; "
                    "scripts/setup.sh installs them when it runs as root)")
    build = REPO / "build" / "aarch64"
    build_cmake_project(REPO, build, defines={
        "KILN_BUILD_PYTHON": "OFF", "KILN_BUILD_TESTS": "ON",
        "CMAKE_TOOLCHAIN_FILE": str(REPO / "cmake" / "toolchains" / "aarch64-linux-gnu.cmake")},
        targets=("kernel_tiers_test",))
    program = str(build / "tests" / "cpp" / "kernel_tiers_test")
    quick = [] if full_tier(request.config) else ["--threads", "1", "--skip", "row_exact_",
                                                  "--skip", "vec_math_error_against_float64"]
    proc = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", program, *quick], capture_output=True,
                          text=True, env=clean_env(), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    assert proc.stdout.splitlines()[-1].endswith(", 0 failures"), proc.stdout[-2000:]
    # The NEON tables really ran (qemu-aarch64 emulates a CPU with every feature the level needs).
    assert "levels dispatched: baseline neon\n" in proc.stdout, proc.stdout[-2000:]
    # The levels the harness compares.
    proc = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu",
                           str(build / "tests" / "cpp" / "kernel_tiers_test"), "--levels"],
                          capture_output=True, text=True, env=clean_env(), timeout=600)
    assert proc.stdout.split() == ["baseline", "neon"], proc.stdout + proc.stderr


def test_export_report_says_which_tier_serves_each_method(tmp_path):
    import torch

    from kiln.export import export

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    report = export(model, (torch.randn(2, 8),), tmp_path / "mlp.kiln")
    method = report.methods["forward"]
    loaded = kiln.load(tmp_path / "mlp.kiln").method()
    tiers = {}
    for info in loaded.instructions:
        name = kiln.kernel_tier_name(info.tier)
        tiers[name] = tiers.get(name, 0) + 1
    assert method.kernel_tiers == tiers and sum(tiers.values()) == method.num_instructions
    assert report.isa == kiln.detected_isa()
    assert f"kernels here ({report.isa}): " in str(report)
    program = kiln.load(tmp_path / "mlp.kiln")
    program.method()
    assert report.packed_bytes == program.packed_bytes


@pytest.mark.parametrize("kernels", ["optimized", "portable"])
def test_packed_weights_replace_the_mapped_copy(tmp_path, kernels):
    """A packed weight replaces the file's pages in memory instead of doubling them:
    loading and running a 64 MB MLP grows the process by about 64 MB either way."""
    import torch

    from kiln.export import export

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048, bias=False) for _ in range(4)]).eval()
    path = tmp_path / "mlp.kiln"
    export(model, (torch.randn(4, 2048),), path)
    weight_bytes = 4 * 2048 * 2048 * 4
    out = run_python(f"""
        import numpy as np, kiln

        def rss():
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

        x = np.ones((4, 2048), np.float32)
        before = rss()
        program = kiln.load({str(path)!r}, kernels={kernels!r})
        method = program.method()
        method(x)
        print(rss() - before, program.packed_bytes, sorted({{i.tier for i in method.instructions}}))
    """)
    growth, packed, tiers = out.strip().split(maxsplit=2)
    growth, packed = int(growth), int(packed)
    if kernels == "optimized":
        assert tiers == "[100]" and packed >= weight_bytes, out
    else:
        assert tiers == "[0]" and packed == 0, out
    # One copy of the weights (packed, or the mapped file's pages) plus activations and code.
    assert weight_bytes * 0.9 < growth < weight_bytes + (24 << 20), (growth, weight_bytes)
