"""Bad program files (a typed error, never a crash; docs/fuzzing.md): truncated, bit-flipped, garbage,
or lying about sizes.

Every case runs in a subprocess so that a crash fails the test instead of
killing the run; each must end in a typed KilnError (or, for flips that leave
the structure intact, a normal load) and none may grow memory beyond what the
file could justify.
"""

import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kiln

from conftest import clean_env

WORKER = Path(__file__).with_name("corrupt_worker.py")
HEADER = struct.Struct("<8sIIQQQQQ8x")
MAX_RSS_GROWTH_KIB = 64 * 1024


def run_cases(tmp_path, base: Path, cases: list) -> dict:
    spec = tmp_path / f"cases_{len(cases)}_{cases[0]['id']}.json"
    spec.write_text(json.dumps({"base": str(base), "cases": cases}))
    proc = subprocess.run([sys.executable, str(WORKER), str(spec)], capture_output=True, text=True,
                          timeout=600, env=clean_env())
    last_case = [l for l in proc.stdout.splitlines() if l.startswith("case ")][-1:]
    assert proc.returncode == 0, (
        f"worker died with {proc.returncode} at {last_case}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["rss_growth_kib"] < MAX_RSS_GROWTH_KIB, summary
    return summary["outcomes"]


@pytest.fixture(scope="module")
def base(exported):
    path, *_ = exported("cnn")
    return path


def test_truncation_at_many_offsets(tmp_path, base):
    size = base.stat().st_size
    lengths = sorted(set(list(range(0, 80)) + list(range(80, size, max(1, size // 300))) + [size - 1]))
    cases = [{"id": f"truncate-{n}", "kind": "truncate", "length": n} for n in lengths]
    outcomes = run_cases(tmp_path, base, cases)
    assert outcomes == {"truncate": {"InvalidProgram": len(cases)}}


def test_random_byte_flips(tmp_path, base):
    data = base.read_bytes()
    segments_offset = HEADER.unpack_from(data)[5]
    rng = random.Random(20261129)
    cases = []
    for i in range(2500):
        # Most flips hit the header and the program table, where structure lives;
        # some anywhere (constant data: a flip there is a legal, different weight).
        limit = segments_offset if i < 2000 else len(data)
        edits = [(rng.randrange(limit), rng.randrange(1, 256)) for _ in range(rng.randint(1, 4))]
        cases.append({"id": f"flip-{i}", "kind": "flip", "edits": edits})
    outcomes = {}
    for chunk in range(0, len(cases), 500):
        for _kind, counts in run_cases(tmp_path, base, cases[chunk:chunk + 500]).items():
            for outcome, n in counts.items():
                outcomes.setdefault(outcome, 0)
                outcomes[outcome] += n
    print("flip outcomes:", outcomes)
    assert sum(outcomes.values()) == 2500
    allowed = {"InvalidProgram", "NotSupported", "MissingKernel", "MissingBackend", "OutOfMemory",
               "ExecutionError", "InvalidInput", "loaded", "ran"}
    assert set(outcomes) <= allowed, outcomes
    assert outcomes.get("InvalidProgram", 0) > 1000  # the verifier, not luck, stops most of them


def test_garbage(tmp_path, base):
    rng = random.Random(7)
    blobs = [b"", b"K", b"KILNPRG\0", bytes(64), bytes(4096)]
    blobs += [bytes(rng.randrange(256) for _ in range(n)) for n in (1, 63, 64, 65, 1000, 100_000)]
    valid_header = base.read_bytes()[:64]
    blobs += [valid_header + bytes(rng.randrange(256) for _ in range(n)) for n in (0, 100, 5000)]
    cases = [{"id": f"garbage-{i}", "kind": "raw", "hex": b.hex()} for i, b in enumerate(blobs)]
    assert run_cases(tmp_path, base, cases) == {"raw": {"InvalidProgram": len(cases)}}


def test_header_claiming_huge_sizes(tmp_path, base):
    data = base.read_bytes()
    magic, version, hsize, fb_off, fb_size, seg_off, seg_size, file_size = HEADER.unpack_from(data)
    huge = [1 << 62, (1 << 64) - 1, 1 << 40]
    variants = []
    for h in huge:
        variants += [
            (magic, version, hsize, fb_off, h, seg_off, seg_size, file_size),
            (magic, version, hsize, fb_off, fb_size, seg_off, h, file_size),
            (magic, version, hsize, fb_off, fb_size, h, seg_size, file_size),
            (magic, version, hsize, h, fb_size, seg_off, seg_size, file_size),
            (magic, version, hsize, fb_off, fb_size, seg_off, seg_size, h),
            (magic, version, hsize, fb_off, h, seg_off, h, h),
        ]
    variants.append((magic, 999, hsize, fb_off, fb_size, seg_off, seg_size, file_size))
    blobs = [HEADER.pack(*v) + data[64:] for v in variants]
    cases = [{"id": f"huge-{i}", "kind": "raw", "hex": b.hex()} for i, b in enumerate(blobs)]
    assert run_cases(tmp_path, base, cases) == {"raw": {"InvalidProgram": len(cases)}}


def test_messages_say_what_and_where(base, tmp_path):
    data = base.read_bytes()
    with pytest.raises(kiln.InvalidProgram, match="bad magic"):
        kiln.load(b"NOTKILN!" + data[8:])
    with pytest.raises(kiln.InvalidProgram, match=r"header says the file is \d+ bytes but it is \d+"):
        kiln.load(data[:-10])
    truncated = tmp_path / "truncated.kiln"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(kiln.InvalidProgram, match="truncated.kiln"):
        kiln.load(truncated)
    with pytest.raises(kiln.KilnError, match="does-not-exist.kiln"):
        kiln.load(tmp_path / "does-not-exist.kiln")


def test_arena_limit_is_enforced(base):
    with pytest.raises(kiln.KilnError, match="max_memory_bytes"):
        kiln.load(base, max_memory_bytes=1024)
