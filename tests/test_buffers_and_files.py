"""What kiln borrows and maps, and what callers can do to it afterwards without crashing it
(docs/threads-and-files.md).

- A buffer is borrowed only when nothing can write it afterwards (an immutable
  bytes object); everything else, read-only views of writable memory included,
  is copied at load.
- A mapped file's program structure is copied and verified at load: changing
  the file later can change weights (documented), never what was verified.
  kiln.load(path, mmap=False) reads the whole file into private memory.
- Paths that are not regular files, or that hold a NUL, are refused before
  anything is opened or read.

Cases that crashed before the fix run in a subprocess, so a crash fails the
test instead of killing the run.
"""

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kiln

from conftest import assert_close, clean_env

HEADER = struct.Struct("<8sIIQQQQQ8x")


def run_script(code: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=clean_env())


def aligned_copy(data: bytes) -> np.ndarray:
    """A writable numpy array holding `data` at a 64-byte aligned address."""
    raw = np.zeros(len(data) + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    a = raw[start:start + len(data)]
    a[:] = np.frombuffer(data, np.uint8)
    assert a.ctypes.data % 64 == 0
    return a


def test_read_only_view_of_writable_memory_is_copied(exported):
    """Defect 2: a read-only memoryview of an aligned, writable array was
    borrowed, and writing the array afterwards crashed the next load_method."""
    path, _, (x,), _ = exported("mlp")
    proc = run_script(f"""
        import numpy as np, kiln
        data = open({str(path)!r}, "rb").read()
        raw = np.zeros(len(data) + 64, np.uint8)
        start = (-raw.ctypes.data) % 64
        a = raw[start:start + len(data)]
        a[:] = np.frombuffer(data, np.uint8)
        program = kiln.load(memoryview(a).toreadonly())
        print("borrowed", program._native.borrows_buffer)
        a[:] = 0xFF                       # the owner writes its memory after the load
        x = np.ones((4, 32), np.float32)
        got = program.forward(x)[0]
        want = kiln.load({str(path)!r}).forward(x)[0]
        print("equal", bool(np.array_equal(got, want)))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "borrowed False" in proc.stdout and "equal True" in proc.stdout, proc.stdout


def test_only_immutable_bytes_may_be_borrowed(exported):
    """Borrowed exactly when the source is a bytes object at a 64-byte aligned
    address (CPython places a bytes object's data 32 bytes into its block, so
    here that is rare); every other buffer is copied, aligned or not."""
    path, *_ = exported("mlp")
    data = path.read_bytes()
    a = aligned_copy(data)
    for source in (a, memoryview(a), memoryview(a).toreadonly(), bytearray(data)):
        assert not kiln.load(source)._native.borrows_buffer, type(source)
    kept = [bytes(data) for _ in range(16)]  # kept alive, so each has its own address
    for b in kept:
        aligned = np.frombuffer(b, np.uint8).ctypes.data % 64 == 0
        assert kiln.load(b)._native.borrows_buffer == aligned


def test_a_file_changed_after_load_cannot_change_the_verified_structure(exported, tmp_path):
    """Defect 3: overwriting the program table of a mapped file in place made
    the next load_method read unverified bytes. The structure is private now:
    load_method and runs see what was verified."""
    src, _, (x,), _ = exported("cnn")
    data = src.read_bytes()
    path = tmp_path / "changing.kiln"
    path.write_bytes(data)
    segments_offset = HEADER.unpack_from(data)[5]
    proc = run_script(f"""
        import numpy as np, kiln
        program = kiln.load({str(path)!r})
        x = np.linspace(-1, 1, 2 * 3 * 32 * 32, dtype=np.float32).reshape(2, 3, 32, 32)
        want = program.forward(x)[0]
        with open({str(path)!r}, "r+b") as f:      # in place: same inode, same mapping
            f.seek(64)
            f.write(bytes([0xA5]) * ({segments_offset} - 64))
        method = program.load_method("forward")   # a new method of the same Program
        got = method(x)[0]
        print("equal", bool(np.array_equal(got, want)))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "equal True" in proc.stdout, proc.stdout


def test_mmap_false_reads_the_file_into_private_memory(exported, tmp_path):
    """Defect 3: truncating a mapped file after load gave SIGBUS on the next run.
    With mmap=False nothing the file goes through afterwards matters."""
    src, *_ = exported("cnn")
    path = tmp_path / "truncated-later.kiln"
    path.write_bytes(src.read_bytes())
    proc = run_script(f"""
        import os, numpy as np, kiln
        program = kiln.load({str(path)!r}, mmap=False)
        x = np.linspace(-1, 1, 2 * 3 * 32 * 32, dtype=np.float32).reshape(2, 3, 32, 32)
        want = program.forward(x)[0]
        os.truncate({str(path)!r}, 0)
        got = program.load_method("forward")(x)[0]
        print("equal", bool(np.array_equal(got, want)))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "equal True" in proc.stdout, proc.stdout


def test_mmap_option_is_checked():
    with pytest.raises(kiln.InvalidArgument, match="mmap must be True or False"):
        kiln.load(b"", mmap="yes")


def test_a_file_truncated_before_load_is_an_error_not_a_signal(exported, tmp_path):
    src, *_ = exported("cnn")
    data = src.read_bytes()
    for n in (0, 10, 64, len(data) // 2, len(data) - 1):
        path = tmp_path / f"short-{n}.kiln"
        path.write_bytes(data[:n])
        with pytest.raises(kiln.InvalidProgram, match=f"short-{n}.kiln"):
            kiln.load(path, mmap=False)
        with pytest.raises(kiln.InvalidProgram, match=f"short-{n}.kiln"):
            kiln.load(path)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    """Defect 5: kiln.load on a FIFO blocked in open() until a writer came."""
    fifo = tmp_path / "model.kiln"
    os.mkfifo(fifo)
    proc = run_script(f"""
        import kiln
        for load in (kiln.load, kiln.load_library):
            try:
                load({str(fifo)!r})
            except kiln.KilnError as e:
                print(type(e).__name__, e)
    """, timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert lines[0].startswith("InvalidArgument") and "is not a regular file" in lines[0], lines[0]
    assert lines[1].startswith("InvalidArgument") and "is not a regular file" in lines[1], lines[1]


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(kiln.InvalidArgument, match="is not a regular file"):
        kiln.load(tmp_path)


@pytest.mark.parametrize("what", ["load", "load_library"])
def test_a_path_with_a_nul_is_refused(exported, what):
    """Defect 6: the path was cut at the NUL and another file opened."""
    path, *_ = exported("mlp")
    load = kiln.load if what == "load" else kiln.load_library
    with pytest.raises(kiln.InvalidArgument, match="contains a NUL byte"):
        load(str(path) + "\0.ignored")
    with pytest.raises(kiln.InvalidArgument, match="contains a NUL byte"):
        load(Path(str(path) + "\0.ignored"))


def test_a_program_file_replaced_by_rename_keeps_working(exported, tmp_path):
    """The documented way to update a model in place: write a new file and
    rename it over the old one; loaded programs keep the old file's inode."""
    src, _, (x,), _ = exported("mlp")
    path = tmp_path / "model.kiln"
    path.write_bytes(src.read_bytes())
    program = kiln.load(path)
    want = program.forward(x.numpy())[0]
    other = tmp_path / "model.kiln.new"
    other.write_bytes(b"x" * 100)
    os.replace(other, path)
    assert_close(program.load_method("forward")(x.numpy())[0], want, 0.0)
