"""The packed-weight cache file (LoadOptions::packed_cache, KILN_PACKED_CACHE; docs/memory.md).

The first load of a mapped program packs its weights and writes them to the cache; every later
load of the same file maps them read-only and shares them, with outputs bit-equal to packing.
A cache file that is damaged, stale or not to be trusted is noticed, reported, never used, and
written anew; no cache problem fails a load.
"""
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln

from conftest import clean_env

# Fields of the cache file's header (runtime/executor/packed_cache_file.cpp).
VERSION_OFFSET = 8
CPU_FEATURES_OFFSET = 64
KILN_VERSION_OFFSET = 72  # 24 bytes, NUL-padded


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory, torch):
    """A two-layer MLP (2 MB of weights, packed by the optimized linear) and an input."""
    from kiln.export import export

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).eval()
    path = tmp_path_factory.mktemp("packed_cache") / "mlp.kiln"
    export(model, (torch.randn(4, 512),), path)
    x = np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32)
    return path, x


@pytest.fixture
def program_path(mlp_file, tmp_path):
    """A private copy of the MLP file (the cache is keyed by the file's identity)."""
    path = tmp_path / "mlp.kiln"
    shutil.copyfile(mlp_file[0], path)
    return path


def run(path, x, cache):
    program = kiln.load(path, packed_cache=cache)
    (y,) = program.method()(x)
    return program, y


def reference(path, x):
    return run(path, x, False)[1]


def cache_files(directory):
    return sorted(p for p in os.listdir(directory))


def test_second_load_maps_what_the_first_wrote(program_path, mlp_file, tmp_path):
    x = mlp_file[1]
    cache = tmp_path / "cache"
    first, y1 = run(program_path, x, cache)
    assert first.packed_bytes >= 2 * 512 * 512 * 4 and first.packed_mapped_bytes == 0
    assert first.packed_cache_report.startswith("no ") and "; wrote " in first.packed_cache_report, \
        first.packed_cache_report
    (name,) = cache_files(cache)
    assert name.endswith(".kpack")
    assert os.stat(cache / name).st_mode & 0o777 == 0o600
    assert os.stat(cache).st_mode & 0o777 == 0o700

    second, y2 = run(program_path, x, cache)
    assert second.packed_cache_report == f"mapped {cache / name} (2 packed constants)"
    assert second.packed_mapped_bytes == second.packed_bytes == first.packed_bytes
    assert np.array_equal(y1, y2) and np.array_equal(y2, reference(program_path, x))
    assert cache_files(cache) == [name]  # nothing new to write


def test_no_cache_unless_asked(program_path, mlp_file, tmp_path):
    program, _ = run(program_path, mlp_file[1], None)  # KILN_PACKED_CACHE is unset here
    assert "KILN_PACKED_CACHE" not in os.environ
    assert program.packed_cache_report == "" and program.packed_mapped_bytes == 0
    program, _ = run(program_path, mlp_file[1], False)
    assert program.packed_cache_report == ""


def test_a_buffer_or_unusable_directory_gets_no_cache_and_still_loads(program_path, mlp_file, tmp_path):
    x = mlp_file[1]
    program = kiln.load(program_path.read_bytes(), packed_cache=tmp_path / "cache")
    assert np.array_equal(program.method()(x)[0], reference(program_path, x))
    assert program.packed_cache_report.startswith("off: only a program loaded from a mapped file")
    assert not (tmp_path / "cache").exists()
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    program, y = run(program_path, x, not_a_directory)
    assert "is not a directory" in program.packed_cache_report and program.packed_cache_report.startswith("off: ")
    with pytest.raises(kiln.InvalidArgument, match="packed_cache"):
        kiln.load(program_path, packed_cache=3)


def damage_truncate(data: bytearray):
    del data[-100:]


def damage_data_byte(data: bytearray):
    data[-1] ^= 0x40


def damage_table_byte(data: bytearray):
    data[128 + 40] ^= 0x01  # the first entry's layout name


def damage_version(data: bytearray):
    struct.pack_into("<I", data, VERSION_OFFSET, 2)


def damage_kiln_version(data: bytearray):
    data[KILN_VERSION_OFFSET:KILN_VERSION_OFFSET + 24] = b"0.0.1".ljust(24, b"\0")


def damage_cpu_features(data: bytearray):
    (features,) = struct.unpack_from("<Q", data, CPU_FEATURES_OFFSET)
    struct.pack_into("<Q", data, CPU_FEATURES_OFFSET, features ^ 1)


@pytest.mark.parametrize("damage, reason", [
    (damage_truncate, "refused .*: it says it is \\d+ bytes but is \\d+ \\(truncated\\?\\)"),
    (damage_data_byte, "mapped .*; the copy of .* was corrupted"),
    (damage_table_byte, "refused .*: its header or entry table is corrupted"),
    (damage_version, "refused .*: it has cache format 2"),
    (damage_kiln_version, "refused .*: it was written by kiln 0.0.1 \\(this is kiln "),
    (damage_cpu_features, "refused .*: it was written for other CPU features"),
])
def test_a_damaged_cache_is_noticed_not_used_and_written_anew(program_path, mlp_file, tmp_path, damage, reason):
    import re

    x = mlp_file[1]
    cache = tmp_path / "cache"
    run(program_path, x, cache)
    (name,) = cache_files(cache)
    data = bytearray((cache / name).read_bytes())
    damage(data)
    (cache / name).write_bytes(bytes(data))

    program, y = run(program_path, x, cache)
    assert re.match(reason + ".*; wrote ", program.packed_cache_report), program.packed_cache_report
    assert program.packed_mapped_bytes < program.packed_bytes
    assert np.array_equal(y, reference(program_path, x))
    # The file written anew serves the next load whole.
    program, y = run(program_path, x, cache)
    assert program.packed_cache_report.startswith("mapped ") and program.packed_mapped_bytes == program.packed_bytes
    assert np.array_equal(y, reference(program_path, x))


def test_a_cache_others_may_write_is_refused(program_path, mlp_file, tmp_path):
    x = mlp_file[1]
    cache = tmp_path / "cache"
    run(program_path, x, cache)
    (name,) = cache_files(cache)
    os.chmod(cache / name, 0o666)
    program, _ = run(program_path, x, cache)
    assert program.packed_cache_report.startswith(f"refused {cache / name}: others may write to it; wrote ")
    assert program.packed_mapped_bytes == 0
    assert os.stat(cache / name).st_mode & 0o777 == 0o600  # the new file


def test_a_changed_program_file_does_not_use_the_old_cache(program_path, mlp_file, tmp_path, torch):
    """Renamed over (new inode) or rewritten in place (new ctime, new table): a new cache file."""
    from kiln.export import export

    x = mlp_file[1]
    cache = tmp_path / "cache"
    run(program_path, x, cache)
    torch.manual_seed(1)  # the same shapes, other weights: the same size of file
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).eval()
    other = tmp_path / "other.kiln"
    export(model, (torch.randn(4, 512),), other)
    assert other.stat().st_size == program_path.stat().st_size
    with open(program_path, "r+b") as f:  # in place: same inode
        f.write(other.read_bytes())
    program, y = run(program_path, x, cache)
    assert program.packed_cache_report.startswith("no "), program.packed_cache_report
    assert np.array_equal(y, reference(other, x))
    assert len(cache_files(cache)) == 2

    renamed = tmp_path / "renamed.kiln"
    shutil.copyfile(mlp_file[0], renamed)
    os.replace(renamed, program_path)
    program, y = run(program_path, x, cache)
    assert program.packed_cache_report.startswith("no "), program.packed_cache_report
    assert np.array_equal(y, reference(mlp_file[0], x))


HOLD = textwrap.dedent("""
    import sys, numpy as np, kiln
    program = kiln.load(sys.argv[1])
    (y,) = program.method()(np.load(sys.argv[2]))
    np.save(sys.argv[3], y)
    print(program.packed_bytes, program.packed_mapped_bytes, program.packed_cache_report, sep="|", flush=True)
    sys.stdin.readline()  # hold the program until the test has looked
""")


def start_holders(program_path, x, tmp_path, cache, count):
    np.save(tmp_path / "x.npy", x)
    env = clean_env(KILN_PACKED_CACHE=str(cache))
    return [subprocess.Popen([sys.executable, "-c", HOLD, str(program_path), str(tmp_path / "x.npy"),
                              str(tmp_path / f"y{i}.npy")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for i in range(count)]


def finish(holders):
    lines = []
    for proc in holders:
        line = proc.stdout.readline()
        lines.append(line.rstrip("\n"))
    return lines


def release(holders):
    for proc in holders:
        _, err = proc.communicate("\n", timeout=120)
        assert proc.returncode == 0, err


def test_racing_first_loads_both_succeed_and_leave_one_cache(program_path, mlp_file, tmp_path):
    x = mlp_file[1]
    cache = tmp_path / "cache"
    holders = start_holders(program_path, x, tmp_path, cache, 2)
    lines = finish(holders)
    release(holders)
    want = reference(program_path, x)
    for i, line in enumerate(lines):
        assert "; wrote " in line or line.split("|")[2].startswith("mapped "), line
        assert np.array_equal(np.load(tmp_path / f"y{i}.npy"), want)
    (name,) = cache_files(cache)  # no temporary file left
    program, _ = run(program_path, x, cache)
    assert program.packed_cache_report == f"mapped {cache / name} (2 packed constants)"


def mapping_kb(pid: int, suffix: str) -> dict:
    """The smaps fields (kB) of the mappings of files whose name ends with `suffix`, summed."""
    total, inside = {}, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if fields and "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line
                inside = fields[-1].endswith(suffix)
            elif inside and len(fields) == 3 and fields[2] == "kB":
                total[fields[0].rstrip(":")] = total.get(fields[0].rstrip(":"), 0) + int(fields[1])
    return total


def test_processes_share_one_physical_copy(program_path, mlp_file, tmp_path):
    x = mlp_file[1]
    cache = tmp_path / "cache"
    run(program_path, x, cache)  # writes the cache
    holders = start_holders(program_path, x, tmp_path, cache, 2)
    try:
        lines = finish(holders)
        for line in lines:
            packed, mapped, report = line.split("|")
            assert report.startswith("mapped ") and int(mapped) == int(packed) > 0, line
        packed_kb = int(lines[0].split("|")[0]) // 1024
        # Both processes map the same pages of the file (shared, dirty until written back): each is
        # charged half of them.
        for proc in holders:
            kb = mapping_kb(proc.pid, ".kpack")
            assert kb["Shared_Clean"] + kb["Shared_Dirty"] >= 0.95 * packed_kb, (kb, packed_kb)
            assert kb["Private_Clean"] + kb["Private_Dirty"] <= 0.05 * packed_kb, (kb, packed_kb)
            assert kb["Pss"] <= 0.55 * kb["Rss"], (kb, packed_kb)
    finally:
        release(holders)
