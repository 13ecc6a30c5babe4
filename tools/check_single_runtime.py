#!/usr/bin/env python3
"""Checks that a kiln package holds exactly one copy of the runtime.

    python tools/check_single_runtime.py [DIR]      (default: the installed kiln package)

Everything process-wide in kiln (kernel and backend registries, log hook,
thread pool) must live in libkiln.so.0 and nowhere else. For every ELF file
under DIR (found by its magic bytes, whatever its name) this runs

    nm -DC --defined-only      the dynamic symbols it defines
    nm -DC --undefined-only    the dynamic symbols it imports
    readelf -n                 its notes

and also reads the PT_NOTE segments itself (that is what the runtime's own
detection, dl_iterate_phdr, sees), and `nm -C --defined-only` (the full symbol
table, when the file has one) for kernel code. It passes only if

  * exactly one file, named libkiln.so.0, defines every guarded symbol
    (GUARDED_SYMBOLS: the API entry points that own process-wide state) and
    carries the kiln runtime note (owner "kiln", type 0x4b4c4e31), both in
    readelf's listing and in a loadable PT_NOTE segment;
  * every other ELF file defines none of the guarded symbols and carries no
    runtime note (a copy built with hidden visibility exports nothing, so only
    the note gives it away);
  * every Python extension module imports (nm 'U') at least one guarded
    symbol, i.e. really uses the shared runtime;
  * the kernel code the process must hold once (the f32 GEMM, the kernel
    argument helpers: KERNEL_CODE_SYMBOLS, and the "KLN2" notes that
    KILN_KERNEL_CODE_NOTE puts into their objects) is in libkiln.so.0 only
    (in a static build, where there is no libkiln.so.0, in one file): an
    extension library that compiled its own copy is caught by its symbols,
    hidden or not, or, stripped, by the note;
  * every tool run succeeded: a file that cannot be read is a failure.

Exit status 0 on success, 1 on failure (2 on bad usage). Importable:
check(directory) -> Report, with .ok, .problems and .text().
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

RUNTIME_SONAME = "libkiln.so.0"
NOTE_OWNER = b"kiln"
NOTE_TYPE = 0x4B4C4E31  # "KLN1", runtime/registry/single_runtime.cpp
KERNEL_NOTE_TYPE = 0x4B4C4E32  # "KLN2", kernels/common/internal_api.h (KILN_KERNEL_CODE_NOTE)

# The exported entry points that own process-wide state. Matched on the
# demangled name without its parameter list, ABI tag or symbol version.
GUARDED_SYMBOLS = (
    "kiln::register_kernel",
    "kiln::register_backend",
    "kiln::registered_kernels",
    "kiln::registered_backends",
    "kiln::registration_failures",
    "kiln::load_library",
    "kiln::runtime_library_path",
    "kiln::runtime_copies",
    "kiln::check_single_runtime",
    "kiln::load_plugins_from_env",
    "kiln::set_log_handler",
    "kiln::log",
    "kiln::num_threads",
    "kiln::set_num_threads",
    "kiln::internal::parallel_for_impl",
)

# Kernel code that exists once per package: the f32 GEMM driver, its microkernel tables (one per
# instruction-set level) and the argument helpers every kernel library calls. Matched on the
# demangled base name (symbol_base), defined in any symbol table.
KERNEL_CODE_SYMBOLS = (
    re.compile(r"kiln::kernels::optimized::(gemm|prepack_b|prepack_b_into|pack_b_panels|"
               r"gemm_worker_scratch_bytes|prepacked_b_floats)"),
    re.compile(r"kiln::kernels::optimized::[a-z0-9_]+::f32_gemm"),
    re.compile(r"kiln::kernels::(tensor_arg|prepare_tensor_arg|check_arity|int_arg|string_arg|resize_output)"),
)

_NM_LINE = re.compile(r"^\s*(?:[0-9a-fA-F]+\s+)?(\S)\s+(.+)$")


def symbol_base(demangled: str) -> str:
    """'kiln::runtime_copies[abi:cxx11]()@@KILN_0' -> 'kiln::runtime_copies'."""
    name = re.sub(r"@@?[A-Za-z0-9_.]+$", "", demangled.strip())
    name = name.replace("[abi:cxx11]", "")
    return name.split("(", 1)[0].strip()


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def is_python_extension(path: Path) -> bool:
    return any(path.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so") \
        or path.name.startswith("_kiln")


def pt_note_owners(path: Path) -> list[tuple[bytes, int]]:
    """(owner, type) of every note in the file's PT_NOTE segments (ELF64/ELF32, either byte order)."""
    return [(name, ntype) for name, ntype, _desc in pt_notes(path)]


def pt_notes(path: Path) -> list[tuple[bytes, int, bytes]]:
    """(owner, type, description) of every note in the file's PT_NOTE segments."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    is64 = data[4] == 2
    endian = "<" if data[5] == 1 else ">"
    if is64:
        e_phoff, = struct.unpack_from(endian + "Q", data, 0x20)
        e_phentsize, e_phnum = struct.unpack_from(endian + "HH", data, 0x36)
    else:
        e_phoff, = struct.unpack_from(endian + "I", data, 0x1C)
        e_phentsize, e_phnum = struct.unpack_from(endian + "HH", data, 0x2A)
    notes = []
    for i in range(e_phnum):
        off = e_phoff + i * e_phentsize
        if is64:
            p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(endian + "IIQQQQ", data, off)
        else:
            p_type, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(endian + "IIIII", data, off)
        if p_type != 4:  # PT_NOTE
            continue
        p, end = p_offset, p_offset + p_filesz
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from(endian + "III", data, p)
            name = data[p + 12:p + 12 + namesz].rstrip(b"\0")
            desc_at = p + 12 + ((namesz + 3) & ~3)
            notes.append((name, ntype, data[desc_at:desc_at + descsz]))
            p += 12 + ((namesz + 3) & ~3) + ((descsz + 3) & ~3)
    return notes


@dataclass
class FileResult:
    path: Path
    defined: set = field(default_factory=set)      # guarded symbols it defines
    undefined: set = field(default_factory=set)    # guarded symbols it imports
    readelf_note: bool = False                     # readelf -n lists a kiln runtime note
    segment_note: bool = False                     # a PT_NOTE segment holds it (what dl_iterate_phdr sees)
    kernel_symbols: set = field(default_factory=set)  # KERNEL_CODE_SYMBOLS it defines (any symbol table)
    kernel_notes: set = field(default_factory=set)    # tags of the kernel code notes it carries
    errors: list = field(default_factory=list)

    @property
    def has_note(self) -> bool:
        return self.readelf_note or self.segment_note


@dataclass
class Report:
    directory: Path
    files: list
    problems: list
    guarded: tuple = GUARDED_SYMBOLS

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        lines = [f"kiln single-runtime check of {self.directory}",
                 f"guarded symbols ({len(self.guarded)}): {', '.join(self.guarded)}",
                 f"ELF files: {len(self.files)}"]
        for r in self.files:
            rel = os.path.relpath(r.path, self.directory)
            lines.append(f"  {rel}: defines {len(r.defined)}/{len(self.guarded)} guarded, "
                         f"imports {len(r.undefined)}, runtime note: "
                         f"{'yes' if r.has_note else 'no'}"
                         f"{' (readelf only)' if r.readelf_note and not r.segment_note else ''}"
                         f"{' (segment only)' if r.segment_note and not r.readelf_note else ''}"
                         f", kernel code: {', '.join(sorted(r.kernel_notes)) or 'none'}"
                         f" ({len(r.kernel_symbols)} symbols)"
                         f"{'  [unreadable]' if r.errors else ''}")
        if self.ok:
            lines.append("PASS: exactly one runtime (libkiln.so.0) in this package")
        else:
            lines.append(f"FAIL: {len(self.problems)} problem(s)")
            lines.extend(f"  - {p}" for p in self.problems)
        return "\n".join(lines)


def _run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})


def _symbol_names(nm_output: str) -> set:
    """The base names of the symbols in nm's output lines."""
    return {symbol_base(m.group(2)) for m in map(_NM_LINE.match, nm_output.splitlines()) if m}


def _nm(tool: str, path: Path, which: str, result: FileResult) -> set | None:
    proc = _run([tool, "-DC", which, str(path)])
    if proc.returncode != 0:
        result.errors.append(f"nm {which} failed ({proc.returncode}): {proc.stderr.strip()}")
        return None
    return _symbol_names(proc.stdout)


def inspect(path: Path, guarded=GUARDED_SYMBOLS, nm: str = "nm", readelf: str = "readelf") -> FileResult:
    result = FileResult(path)
    defined = _nm(nm, path, "--defined-only", result)
    undefined = _nm(nm, path, "--undefined-only", result)
    if defined is not None:
        result.defined = {s for s in guarded if s in defined}
    if undefined is not None:
        result.undefined = {s for s in guarded if s in undefined}
    proc = _run([readelf, "-n", "-W", str(path)])
    if proc.returncode != 0:
        result.errors.append(f"readelf -n failed ({proc.returncode}): {proc.stderr.strip()}")
    else:
        for line in proc.stdout.splitlines():
            fields = line.split()
            if fields and fields[0] == NOTE_OWNER.decode() and f"0x{NOTE_TYPE:08x}" in line.lower():
                result.readelf_note = True
    try:
        notes = pt_notes(path)
        result.segment_note = any(n == NOTE_OWNER and t == NOTE_TYPE for n, t, _ in notes)
        result.kernel_notes = {d.rstrip(b"\0").decode(errors="replace") for n, t, d in notes
                               if n == NOTE_OWNER and t == KERNEL_NOTE_TYPE}
    except (OSError, ValueError, struct.error) as e:
        result.errors.append(f"cannot read program headers: {e}")
    # Kernel code: the dynamic table (exported copies) and the full one (hidden copies, unless stripped).
    full = _nm_all(nm, path, result)
    for names in (defined, full):
        result.kernel_symbols |= {s for s in (names or ()) if any(p.fullmatch(s) for p in KERNEL_CODE_SYMBOLS)}
    return result


def _nm_all(tool: str, path: Path, result: FileResult) -> set | None:
    """Defined symbols of the full symbol table; empty for a stripped file (nm says 'no symbols')."""
    proc = _run([tool, "-C", "--defined-only", str(path)])
    if proc.returncode != 0:
        if "no symbols" in proc.stderr:
            return set()
        result.errors.append(f"nm --defined-only (full table) failed ({proc.returncode}): {proc.stderr.strip()}")
        return None
    return _symbol_names(proc.stdout)


def find_elf_files(directory: Path) -> list:
    seen, files = set(), []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            p = Path(root) / name
            if not p.is_file() or not is_elf(p):
                continue
            real = p.resolve()
            if real in seen:
                continue
            seen.add(real)
            files.append(p)
    return files


def check(directory=None, guarded=GUARDED_SYMBOLS, nm: str | None = None, readelf: str | None = None) -> Report:
    """Checks one directory tree (default: the installed kiln package)."""
    if directory is None:
        import kiln  # noqa: F401  (only for its location)
        directory = Path(kiln.__file__).resolve().parent
    directory = Path(directory)
    nm = nm or shutil.which("nm") or "nm"
    readelf = readelf or shutil.which("readelf") or "readelf"
    guarded = tuple(guarded)
    problems = []
    if not guarded:
        problems.append("the guarded symbol list is empty: nothing would be checked")
    if not directory.is_dir():
        return Report(directory, [], [f"{directory} is not a directory"], guarded)
    files = [inspect(p, guarded, nm, readelf) for p in find_elf_files(directory)]
    if not files:
        problems.append(f"no ELF file under {directory}")

    for r in files:
        for e in r.errors:
            problems.append(f"{r.path}: {e}")

    runtimes = [r for r in files if r.path.name == RUNTIME_SONAME]
    if len(runtimes) != 1:
        problems.append(f"expected exactly one {RUNTIME_SONAME}, found {len(runtimes)}: "
                        f"{[str(r.path) for r in runtimes]}")
    for r in runtimes:
        missing = [s for s in guarded if s not in r.defined]
        if missing:
            problems.append(f"{r.path} does not define: {', '.join(missing)}")
        if not r.readelf_note:
            problems.append(f"{r.path} has no kiln runtime note in readelf -n")
        if not r.segment_note:
            problems.append(f"{r.path} has no kiln runtime note in a PT_NOTE segment")
        if not r.kernel_notes:
            problems.append(f"{r.path} carries no kiln kernel code note: the check of private copies "
                            f"would find nothing")

    for r in files:
        if r in runtimes:
            continue
        if r.defined:
            problems.append(f"{r.path} defines process-wide symbols (a second runtime?): "
                            f"{', '.join(sorted(r.defined))}")
        if r.has_note:
            problems.append(f"{r.path} carries the kiln runtime note: it embeds a copy of the runtime")
        if is_python_extension(r.path) and not r.errors and not r.undefined:
            problems.append(f"{r.path} is a Python extension that imports none of the guarded symbols "
                            f"from {RUNTIME_SONAME}")

    # Kernel code: in the runtime's file only (or, without libkiln.so.0, a static build, in one file).
    holders = [r for r in files if r.kernel_symbols or r.kernel_notes]
    allowed = runtimes if runtimes else holders[:1] if len(holders) == 1 else []
    for r in holders:
        if r in allowed:
            continue
        what = sorted(r.kernel_notes) + sorted(r.kernel_symbols)
        problems.append(f"{r.path} carries a private copy of kiln kernel code "
                        f"({', '.join(what)}): use the runtime's (KILN_INTERNAL_API, docs/architecture.md)")

    # Each guarded symbol is defined exactly once in the tree.
    for s in guarded:
        owners = [r.path for r in files if s in r.defined]
        if len(owners) > 1:
            problems.append(f"{s} is defined by {len(owners)} files: {', '.join(map(str, owners))}")
    return Report(directory, files, problems, guarded)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", help="directory to check (default: the installed kiln package)")
    args = parser.parse_args(argv)
    report = check(args.directory)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
