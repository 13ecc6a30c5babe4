"""Every file reader of libkiln_llm (GGUF, tokenizer.json, an LLM program's metadata)
and `kiln llm export` treat their input as hostile, as kiln.load does:

  * paths: a FIFO is refused without waiting for a writer, a device (/dev/zero) or a
    directory without reading from it, a path with a NUL byte instead of opening the
    file its first part names; by read_gguf, kiln.llm.gguf.GgufFile,
    Tokenizer.from_gguf and Tokenizer.from_json_file alike;
  * memory: a tokenizer.json costs a small multiple of its size (a 16 MB one with
    an unused array of 8 million zeros), `kiln llm export` checks the tensors
    against the metadata before it builds anything from the metadata
    (embedding_length or block_count of 2^20 in a few-KB file), Runner.load
    checks the config's context_length against the positions the program holds
    (2^28 for a 16-position model) -- each hostile case runs in a subprocess under
    RLIMIT_AS, so a regression fails with a MemoryError instead of eating the machine;
  * a GGUF that names a tensor twice is refused;
  * Tokenizer.to_json() round-trips any vocabulary: tokens that are not UTF-8,
    repeated and empty ones.
Errors are typed and name what is wrong.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from llm_files import tiny_llama, write_gguf

import kiln
from kiln.llm import Tokenizer, read_gguf

from conftest import REPO, clean_env

TESTS = REPO / "tests"

# Prepended to every hostile case: `limit(mb)` caps the address space at what the
# process uses now plus `mb` MiB, so that an allocation sized by the file fails.
_PRELUDE = """
import resource, sys
sys.path.insert(0, {tests!r})
def limit(mb):
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (mb << 20), vm + (mb << 20)))
def report(fn):
    try:
        fn()
        print("RESULT ok")
    except Exception as e:
        print("RESULT", type(e).__name__, str(e).replace(chr(10), " "))
"""


def run_case(body: str, timeout: int = 120) -> str:
    """Runs `body` in a fresh interpreter; returns what it reported ("ok" or "ErrorClass message")."""
    code = _PRELUDE.format(tests=str(TESTS)) + textwrap.dedent(body)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                              env=clean_env(OPENBLAS_NUM_THREADS="1", KILN_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the case did not finish in {timeout} s (a reader blocked?)")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return lines[-1][len("RESULT "):]


READERS = {
    "read_gguf": "kiln.llm.read_gguf(path)",
    "GgufFile": "kiln.llm.gguf.GgufFile(path)",
    "Tokenizer.from_gguf": "kiln.llm.Tokenizer.from_gguf(path)",
    "Tokenizer.from_json_file": "kiln.llm.Tokenizer.from_json_file(path)",
}


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    got = run_case(f"""
        import kiln.llm, kiln.llm.gguf
        path = {str(fifo)!r}
        report(lambda: {READERS[reader]})
    """, timeout=60)
    assert got.startswith("InvalidArgument") and "is not a regular file" in got, got


@pytest.mark.parametrize("reader", READERS)
def test_dev_zero_is_refused_without_reading(reader):
    got = run_case(f"""
        import kiln.llm, kiln.llm.gguf
        path = "/dev/zero"
        limit(512)
        report(lambda: {READERS[reader]})
    """)
    assert got.startswith("InvalidArgument") and "'/dev/zero' is not a regular file" in got, got


@pytest.mark.parametrize("reader", READERS)
def test_a_directory_is_refused(tmp_path, reader):
    got = run_case(f"""
        import kiln.llm, kiln.llm.gguf
        path = {str(tmp_path)!r}
        report(lambda: {READERS[reader]})
    """)
    assert got.startswith("InvalidArgument") and "is not a regular file" in got, got


@pytest.mark.parametrize("reader", READERS)
def test_a_path_with_a_nul_byte_is_refused(tmp_path, reader):
    """'model.gguf\\0.txt' would open model.gguf: the OS reads the path up to the NUL."""
    meta, tensors = tiny_llama()
    write_gguf(tmp_path / "model.gguf", meta, tensors)
    (tmp_path / "model.gguf.json").write_text(Tokenizer.from_gguf(str(tmp_path / "model.gguf")).to_json())
    name = "model.gguf.json" if reader == "Tokenizer.from_json_file" else "model.gguf"
    got = run_case(f"""
        import kiln.llm, kiln.llm.gguf
        path = {str(tmp_path / name)!r} + "\\0.other"
        report(lambda: {READERS[reader]})
    """)
    # Refused by the bindings' path argument ("without NUL bytes") before the C++ helper's own check
    # ("contains a NUL byte"), which the C++ readers keep for C++ callers.
    assert got.startswith("InvalidArgument") and ("contains a NUL byte" in got or "without NUL bytes" in got), got


def test_a_tokenizer_json_costs_a_small_multiple_of_its_size(tmp_path):
    """16 MB of JSON, most of it an array nothing reads: parsing may cost ~9 bytes per
    byte (json.h), far below the 256 MiB allowed here (the old reader took 0.6-1.6 GB)."""
    doc = json.loads(Tokenizer.from_json(_minimal_json()).to_json())
    text = json.dumps(doc)[:-1] + ', "unused": [' + ",".join(["0"] * (8 << 20)) + "]}"
    assert len(text) > 16 << 20
    path = tmp_path / "tokenizer.json"
    path.write_text(text)
    got = run_case(f"""
        import kiln.llm
        text = open({str(path)!r}).read()
        limit(256)
        def both():
            kiln.llm.Tokenizer.from_json_file({str(path)!r})
            t = kiln.llm.Tokenizer.from_json(text)
            assert t.encode("abab") == [2, 2]
        report(both)
    """)
    assert got == "ok", got


def _minimal_json() -> str:
    return json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
                       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                       "decoder": {"type": "ByteLevel"}, "added_tokens": [], "normalizer": None})


def test_a_tokenizer_json_cannot_ask_for_a_large_table():
    """Ids may leave holes, but fewer than the document names tokens (plus 256)."""
    with pytest.raises(kiln.InvalidArgument, match=r"token 'a' has id 100000, out of range \(the document names 3"):
        Tokenizer.from_json(_minimal_json().replace('"a": 0', '"a": 100000'))
    sparse = Tokenizer.from_json(_minimal_json().replace('"ab": 2', '"ab": 200'))
    assert sparse.vocab_size == 201 and sparse.encode("ab") == [200]


def test_repeated_tensor_names_are_refused(tmp_path):
    meta, _ = tiny_llama()
    path = write_gguf(tmp_path / "twice.gguf", meta, [("t", np.ones(4)), ("u", np.ones(4)), ("t", np.zeros(4))])
    with pytest.raises(kiln.InvalidProgram, match="tensor 't' appears twice"):
        read_gguf(str(path))
    with pytest.raises(kiln.InvalidProgram, match="tensor 't' appears twice"):
        Tokenizer.from_gguf(str(path))


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    meta, tensors = tiny_llama()
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", meta, tensors)


def test_a_tiny_valid_gguf_exports(tiny_gguf, tmp_path):
    """The positive control of the lies below: the same file, telling the truth, exports and runs."""
    from kiln.llm.export import export_gguf

    report = export_gguf(tiny_gguf, tmp_path / "tiny.kiln", context=16, max_tokens_per_call=4)
    assert report.config["dim"] == 8 and report.config["context_length"] == 16
    assert len(kiln.llm.Runner(tmp_path / "tiny.kiln").generate("ab", max_new_tokens=3, temperature=0)) > 0


@pytest.mark.parametrize("key, value, message", [
    ("llama.embedding_length", 1 << 20,
     r"tensor 'token_embd.weight' is \[3, 8\], but the metadata \(.*llama.embedding_length 1048576"),
    ("llama.block_count", 1 << 20, "llama.block_count 1048576 implies 9437186 tensors but the file has 11"),
    ("llama.block_count", 2, "llama.block_count 2 implies 20 tensors but the file has 11"),
    ("llama.feed_forward_length", 1 << 20, r"tensor 'blk.0.ffn_gate.weight' is \[16, 8\], but the metadata"),
    ("llama.attention.head_count_kv", 2, r"tensor 'blk.0.attn_k.weight' is \[4, 8\], but the metadata"),
])
def test_export_checks_the_tensors_before_it_builds_from_the_metadata(tmp_path, key, value, message):
    meta, tensors = tiny_llama(**{key: value})
    path = write_gguf(tmp_path / "lies.gguf", meta, tensors)
    assert path.stat().st_size < 8192
    got = run_case(f"""
        import torch
        from kiln.llm.export import export_gguf
        limit(1024)
        report(lambda: export_gguf({str(path)!r}, {str(tmp_path / "out.kiln")!r}))
    """, timeout=300)
    assert got.startswith("InvalidProgram"), got
    import re
    assert re.search(message, got), got
    assert not (tmp_path / "out.kiln").exists()


def test_export_names_a_missing_tensor(tmp_path):
    from kiln.llm.export import export_gguf

    meta, tensors = tiny_llama()
    tensors["blk.0.ffn_upx.weight"] = tensors.pop("blk.0.ffn_up.weight")
    path = write_gguf(tmp_path / "missing.gguf", meta, tensors)
    with pytest.raises(kiln.InvalidProgram, match="implies a tensor 'blk.0.ffn_up.weight', which the file does not"):
        export_gguf(path, tmp_path / "out.kiln")


def _small_llama(path, context_length: int):
    """A 16-position Llama program whose config claims `context_length` positions."""
    import torch

    from kiln.llm.export import export_program
    from kiln.llm.model import Llama, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=3, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, hidden_dim=16, rope_theta=10000.0,
                      norm_eps=1e-5, context_length=16, tied_embeddings=True)
    model = Llama(cfg, capacity=16, last_logits_only=True).eval()
    config = {"architecture": "llama", "name": "tiny", "vocab_size": 3, "context_length": context_length,
              "max_tokens_per_call": 4, "bos_id": -1, "eos_id": -1, "add_bos": False, "stop_ids": [],
              "weights": "float32"}
    export_program(model, path, max_tokens_per_call=4, context=16,
                   metadata={"kiln.llm.config": json.dumps(config), "kiln.llm.tokenizer": _minimal_json()})
    return path


def test_runner_checks_the_context_against_the_program(tmp_path):
    honest = _small_llama(tmp_path / "honest.kiln", 16)
    assert kiln.llm.Runner(honest).generate([0, 1], max_new_tokens=2, temperature=0) is not None
    for claimed in (17, 1 << 28, (1 << 31) - 1):
        path = _small_llama(tmp_path / f"claims{claimed}.kiln", claimed)
        got = run_case(f"""
            import kiln.llm
            limit(1024)
            report(lambda: kiln.llm.Runner({str(path)!r}))
        """)
        assert got.startswith("InvalidProgram"), got
        assert (f"kiln.llm.config 'context_length' is {claimed} but the program holds 16 positions "
                "(the bound of input cache_positions)") in got, got


def _random_vocabulary(rng: random.Random) -> list:
    """Byte strings: byte-level tokens, arbitrary bytes (most of them not UTF-8), empty and repeated ones."""
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + ["Ġ", "Ċ", "é", "日", "😀"]
    tokens = [c.encode() for c in alphabet]
    for _ in range(300):
        kind = rng.random()
        if kind < 0.4:
            tokens.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 6))))
        elif kind < 0.5:
            tokens.append(rng.choice(tokens))
        elif kind < 0.52:
            tokens.append(b"")
        else:
            tokens.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))).encode())
    return tokens


@pytest.mark.parametrize("seed", range(5))
def test_to_json_round_trips_any_vocabulary(tmp_path, seed):
    rng = random.Random(seed)
    tokens = _random_vocabulary(rng)
    types = [rng.choice([1, 1, 1, 3, 4]) if t else 1 for t in tokens]
    meta, _ = tiny_llama()
    meta.update({"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types})
    del meta["tokenizer.ggml.merges"]
    path = write_gguf(tmp_path / "vocab.gguf", meta)
    ours = Tokenizer.from_gguf(str(path))
    text = ours.to_json()
    assert isinstance(text, str)
    again = Tokenizer.from_json(text)
    assert again.vocab_size == ours.vocab_size == len(tokens)
    assert again.special_ids == ours.special_ids
    for i, token in enumerate(tokens):
        assert again.token_bytes(i) == ours.token_bytes(i), (i, token)
        assert again.id_to_token(i) == ours.id_to_token(i), (i, token)
        assert again.token_to_id(ours.id_to_token(i)) == ours.token_to_id(ours.id_to_token(i))
    sample = "".join(rng.choice(["a", "b", "é", " ", "日", "😀", "!"]) for _ in range(200))
    assert again.encode(sample) == ours.encode(sample)
    ids = [rng.randrange(len(tokens)) for _ in range(100)]
    assert again.decode(ids) == ours.decode(ids)
