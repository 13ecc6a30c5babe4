"""GGUF files are untrusted input to `kiln llm export` and kiln.llm.Tokenizer.from_gguf:
every way a file can be wrong is a clear typed error naming the file and what is
wrong, never a crash, a read past the end or an allocation the file merely asks for.

  * a GGUF of an unsupported architecture (tests/llm_files.py's writer);
  * a truncated GGUF (SmolLM2's, cut inside the vocabulary and inside the tensor
    data), an empty file, a file that is not GGUF, an unsupported version;
  * hostile counts and lengths patched into a valid header: 2^60 metadata entries,
    a 2^62-byte string, a 2^61-item array, a tensor with 5 dimensions or whose
    data lies past the end of the file;
  * an unsupported tokenizer (tokenizer.ggml.model "t5");
and on a valid file, the reader agrees with the `gguf` package.
"""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
from llm_files import tiny_llama, write_gguf

import kiln
from kiln.llm import Tokenizer, read_gguf

from conftest import clean_env


@pytest.fixture(scope="module")
def smollm2_gguf():
    from zoo import smollm2

    return smollm2.gguf_path()


def small_gguf(path, arch="llama", tokenizer_model="gpt2"):
    """The 3-token metadata of tests/llm_files.py's 1-layer Llama, as `arch` and with
    `tokenizer_model`, and of its tensors only the token embedding."""
    meta, _ = tiny_llama(**{"general.architecture": arch, "tokenizer.ggml.model": tokenizer_model})
    return write_gguf(path, meta, {"token_embd.weight": np.ones((3, 8), np.float32)})


def test_reader_agrees_with_the_gguf_package(smollm2_gguf):
    import gguf

    ours = read_gguf(str(smollm2_gguf))
    theirs = gguf.GGUFReader(smollm2_gguf)
    assert len(ours["tensors"]) == len(theirs.tensors) == 272
    for mine, t in zip(ours["tensors"], theirs.tensors):
        assert mine["name"] == t.name and mine["dims"] == [int(d) for d in t.shape]
        assert mine["ggml_type"] == int(t.tensor_type) and mine["nbytes"] == t.n_bytes
        assert mine["offset"] == t.data_offset
    meta = ours["metadata"]
    for key in ("general.architecture", "llama.block_count", "tokenizer.ggml.pre", "tokenizer.chat_template"):
        assert meta[key] == theirs.fields[key].contents(), key
    assert meta["tokenizer.ggml.tokens"] == theirs.fields["tokenizer.ggml.tokens"].contents()


def test_unsupported_architecture(tmp_path):
    from kiln.llm.export import export_gguf

    path = small_gguf(tmp_path / "mamba.gguf", arch="mamba")
    with pytest.raises(kiln.NotSupported,
                       match=r"holds a model of architecture 'mamba'; kiln llm export supports llama, qwen2"):
        export_gguf(path, tmp_path / "out.kiln")
    assert not (tmp_path / "out.kiln").exists()
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", str(path), "-o", str(tmp_path / "o.kiln")],
                          capture_output=True, text=True, env=clean_env(), timeout=300)
    assert proc.returncode == 1 and "NotSupported" in proc.stderr and "'mamba'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_unsupported_tokenizer(tmp_path):
    path = small_gguf(tmp_path / "t5.gguf", tokenizer_model="t5")
    with pytest.raises(kiln.NotSupported, match=r"tokenizer.ggml.model is 't5'; kiln reads byte-level BPE \('gpt2'\) "
                                                r"and SentencePiece \('llama'\)"):
        Tokenizer.from_gguf(str(path))


def test_small_valid_file(tmp_path):
    path = small_gguf(tmp_path / "small.gguf")
    info = read_gguf(str(path))
    assert info["metadata"]["general.architecture"] == "llama"
    assert [t["name"] for t in info["tensors"]] == ["token_embd.weight"]
    t = Tokenizer.from_gguf(str(path))
    assert t.encode("abab") == [2, 2]


@pytest.mark.parametrize("keep, message", [
    (400_000, "is truncated or corrupt: metadata 'tokenizer.ggml.tokens'"),
    (1_000_000, "is truncated or corrupt: metadata 'tokenizer.ggml.merges' at byte"),
    (-1000, "is truncated: tensor 'output_norm.weight' needs bytes"),
])
def test_truncated_smollm2(smollm2_gguf, tmp_path, keep, message):
    from kiln.llm.export import export_gguf

    data = smollm2_gguf.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:keep])
    with pytest.raises(kiln.InvalidProgram, match=message):
        read_gguf(str(cut))
    with pytest.raises(kiln.InvalidProgram, match=message):
        export_gguf(cut, tmp_path / "out.kiln")
    with pytest.raises(kiln.InvalidProgram, match=message):
        Tokenizer.from_gguf(str(cut))


@pytest.mark.parametrize("content, error, message", [
    (b"", kiln.InvalidProgram, "is 0 bytes, too small for a GGUF file header"),
    (b"NOTGGUF" + b"\0" * 40, kiln.InvalidProgram, "is not a GGUF file"),
    (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), kiln.NotSupported, "is GGUF version 1; kiln reads versions 2 and 3"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 60), kiln.InvalidProgram, "truncated or corrupt: the metadata count"),
    (b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 0), kiln.InvalidProgram, "truncated or corrupt: the tensor count"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62) + b"key", kiln.InvalidProgram,
     "truncated or corrupt: a metadata key"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1) + b"k" + struct.pack("<IIQ", 9, 8, 1 << 61) + b"\0" * 32,
     kiln.InvalidProgram, "truncated or corrupt: metadata 'k'"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1) + b"k" + struct.pack("<II", 77, 0) + b"\0" * 16,
     kiln.InvalidProgram, "metadata 'k' has unknown type 77"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 1, 0, 1) + b"t" + struct.pack("<I5Q", 5, 1, 1, 1, 1, 1) + b"\0" * 16,
     kiln.InvalidProgram, "tensor 't' has 5 dimensions"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 1, 0, 1) + b"t" + struct.pack("<IQQIQ", 2, 1 << 20, 1 << 20, 0, 0) + b"\0" * 16,
     kiln.InvalidProgram, "is truncated: tensor 't' needs bytes"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 1, 0, 1) + b"t" + struct.pack("<IQQIQ", 2, 1 << 40, 1 << 40, 0, 0) + b"\0" * 16,
     kiln.InvalidProgram, "has sizes whose product overflows"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 1, 0, 1) + b"t" + struct.pack("<IQQIQ", 2, 1 << 31, 1 << 31, 0, 0) + b"\0" * 16,
     kiln.InvalidProgram, "has sizes whose product overflows"),  # 2^62 floats: the byte count would wrap
])
def test_hostile_headers_are_clear_errors(tmp_path, content, error, message):
    path = tmp_path / "bad.gguf"
    # Zero padding, so that the counts are refused for what they say, not because the file is tiny.
    path.write_bytes(content + (b"\0" * 64 if len(content) >= 24 else b""))
    with pytest.raises(error, match=message):
        read_gguf(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(kiln.errors.NotFound, match="cannot open"):
        read_gguf(str(tmp_path / "nope.gguf"))


def test_every_truncation_of_a_small_file_is_an_error(tmp_path):
    """Cut a valid file at every length: each prefix is refused cleanly (or, past the
    tensor table, read up to what the tensors need)."""
    data = small_gguf(tmp_path / "small.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    for n in range(len(data)):
        cut.write_bytes(data[:n])
        with pytest.raises((kiln.InvalidProgram, kiln.NotSupported)):
            read_gguf(str(cut))
