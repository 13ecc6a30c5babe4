"""Named metadata in a program (docs/format.md, Metadata): what kiln.llm keeps an
LLM's tokenizer, chat template and config in.

  * round trip from export(..., metadata=...) to Program.metadata(key), bytes exact,
    keys in order, from Python and in place;
  * the exporter refuses what the runtime would refuse;
  * the loader refuses a hostile file: duplicate, empty, over-long or non-UTF-8 keys,
    too many entries, a value whose length runs past the program table (a clear
    InvalidProgram, never a read past the end).
"""

from __future__ import annotations

import struct

import pytest

import kiln
from kiln.export.lowering.ir import Instruction, ProgramIR
from kiln.export.lowering.serialize import write_program

from program_builder import _vector_method


class _Pairs(list):
    """A metadata 'dict' that may repeat keys, to write what the exporter never would."""

    def items(self):
        return iter(self)


def _program(path, metadata) -> None:
    m = _vector_method("forward", 4)
    m.operators = [("aten::relu", "default")]
    m.instructions = [Instruction(0, [0], [1])]
    write_program(ProgramIR([m], [], producer="tests", metadata=metadata), path)


def test_round_trip_through_export(tmp_path):
    import torch

    from kiln.export import export

    blob = bytes(range(256)) * 3
    path = tmp_path / "m.kiln"
    export(torch.nn.ReLU(), (torch.zeros(4),), path, metadata={"z.first": blob, "ключ": "värde ✓", "empty": b""})
    program = kiln.load(path)
    assert program.metadata_keys == ["z.first", "ключ", "empty"]
    assert program.metadata("z.first") == blob
    assert program.metadata("ключ") == "värde ✓".encode()
    assert program.metadata("empty") == b""
    assert program.forward(torch.tensor([-1.0, 2.0, -3.0, 4.0]))[0].tolist() == [0, 2, 0, 4]
    with pytest.raises(kiln.errors.NotFound, match="the program has no metadata 'missing'"):
        program.metadata("missing")
    # A program without metadata has none.
    plain = tmp_path / "plain.kiln"
    _program(plain, {})
    assert kiln.load(plain).metadata_keys == []


@pytest.mark.parametrize("metadata, message", [
    ({"": b"x"}, "must be a non-empty string of at most 256"),
    ({"k" * 257: b"x"}, "must be a non-empty string of at most 256"),
    ({"k": 3}, "metadata 'k' must be bytes or str, not int"),
    ({f"k{i}": b"" for i in range(1025)}, "1025 metadata entries; at most 1024"),
    ([("a", b"")], "metadata must be a dict"),
])
def test_export_refuses_what_the_runtime_would(tmp_path, metadata, message):
    import torch

    from kiln.export import export

    with pytest.raises(kiln.ExportError, match=message):
        export(torch.nn.ReLU(), (torch.zeros(4),), tmp_path / "m.kiln", metadata=metadata)
    assert not (tmp_path / "m.kiln").exists()


@pytest.mark.parametrize("metadata, message", [
    (_Pairs([("a", b"1"), ("a", b"2")]), "metadata key 'a' appears twice"),
    (_Pairs([("", b"1")]), "metadata entry 0 has no key"),
    (_Pairs([("ok", b""), ("k" * 257, b"1")]), "metadata entry 1: the key is longer than 256 bytes or not valid UTF-8"),
    (_Pairs([(b"\xff\xfe", b"1")]), "metadata entry 0: the key is longer than 256 bytes or not valid UTF-8"),
    (_Pairs([(f"k{i}", b"") for i in range(1025)]), "the program has 1025 metadata entries; at most 1024"),
])
def test_loader_refuses_bad_metadata(tmp_path, metadata, message):
    path = tmp_path / "bad.kiln"
    _program(path, metadata)
    with pytest.raises(kiln.InvalidProgram, match=message):
        kiln.load(path)


def test_a_value_longer_than_the_file_is_refused(tmp_path):
    path = tmp_path / "m.kiln"
    marker = b"METADATA-VALUE-MARKER"
    _program(path, {"k": marker})
    data = bytearray(path.read_bytes())
    at = data.index(marker)
    assert struct.unpack_from("<I", data, at - 4)[0] == len(marker)  # the vector's length precedes its bytes
    for claimed in (len(data), 0x7FFFFFFF, 0xFFFFFFFF):
        struct.pack_into("<I", data, at - 4, claimed)
        path.write_bytes(bytes(data))
        with pytest.raises(kiln.InvalidProgram, match="the program table is corrupt"):
            kiln.load(path)
