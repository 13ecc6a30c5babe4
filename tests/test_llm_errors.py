"""The LLM path's failures are kiln errors: malformed GGUF files given to `kiln llm
export` (the API and the command line, one line and no traceback), exports that would
not load (nothing written), and programs whose logits and tokenizer disagree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from llm_files import tiny_llama, write_gguf

import kiln
from kiln.llm import Runner, Tokenizer

from conftest import clean_env


def write_llama_gguf(path, *, change=None, drop=(), metadata=None):
    """The valid 1-layer Llama of tests/llm_files.py (dim 8, 2 heads, 1 KV head, hidden 16, 3 tokens)
    that `kiln llm export` accepts, with one thing made wrong: `change` {tensor: shape} (random
    values), `drop` tensors, `metadata` {key: value} set over the valid ones."""
    meta, tensors = tiny_llama(**(metadata or {}))
    rng = np.random.default_rng(1)
    tensors.update({name: rng.standard_normal(shape).astype(np.float32) for name, shape in (change or {}).items()})
    return write_gguf(path, meta, {name: t for name, t in tensors.items() if name not in drop})


def test_the_small_gguf_exports_and_generates(tmp_path):
    """The positive control of the malformed files below: unchanged, it is a valid model."""
    out = tmp_path / "small.kiln"
    kiln.llm.export_gguf(write_llama_gguf(tmp_path / "small.gguf"), out, dtype="float32", context=8,
                         max_tokens_per_call=4)
    assert Runner(out).generate("abab", max_new_tokens=3, temperature=0) is not None


MALFORMED = [
    (dict(change={"blk.0.attn_q.weight": (8, 6)}), kiln.InvalidProgram,
     "tensor 'blk.0.attn_q.weight' is [8, 6], but the metadata"),
    (dict(change={"token_embd.weight": (3, 7)}), kiln.InvalidProgram, "tensor 'token_embd.weight' is [3, 7]"),
    (dict(drop=("blk.0.ffn_down.weight",)), kiln.InvalidProgram,
     "llama.block_count 1 implies 11 tensors but the file has 10"),
    (dict(metadata={"llama.embedding_length": "eight"}), kiln.ExportError,
     "metadata 'llama.embedding_length' is 'eight', not an integer"),
    (dict(metadata={"llama.attention.head_count": 3}), kiln.ExportError, "inconsistent model sizes"),
    (dict(metadata={"tokenizer.ggml.tokens": ["a", "b", b"\xff\xfe"]}), kiln.KilnError, "tokenizer"),
]
IDS = ["wrong-shape", "wrong-embedding", "missing-tensor", "string-size", "bad-heads", "non-utf8-token"]


@pytest.mark.parametrize("how, error, message", MALFORMED, ids=IDS)
def test_malformed_gguf_is_a_kiln_error(tmp_path, how, error, message):
    path = write_llama_gguf(tmp_path / "bad.gguf", **how)
    out = tmp_path / "bad.kiln"
    with pytest.raises(error, match=re.escape(message)):
        kiln.llm.export_gguf(path, out, dtype="float32", context=8, max_tokens_per_call=4)
    assert list(tmp_path.iterdir()) == [path]  # nothing written


@pytest.mark.parametrize("how, error, message", MALFORMED[::2], ids=IDS[::2])
def test_malformed_gguf_on_the_command_line_is_one_line(tmp_path, how, error, message):
    path = write_llama_gguf(tmp_path / "bad.gguf", **how)
    proc = subprocess.run([sys.executable, "-m", "kiln", "llm", "export", str(path), "-o", str(tmp_path / "bad.kiln"),
                           "--dtype", "float32", "--context", "8"], capture_output=True, text=True, env=clean_env(),
                          timeout=600)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kiln: {error.__name__}: ") and message in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == [path]


def test_bad_export_options_are_invalid_argument(tmp_path):
    path = write_llama_gguf(tmp_path / "small.gguf")
    for options, field in [(dict(context=2**70), "context"), (dict(max_tokens_per_call=0), "max_tokens_per_call"),
                           (dict(context="8"), "context")]:
        with pytest.raises(kiln.InvalidArgument, match=f"{field} must be an integer"):
            kiln.llm.export_gguf(path, tmp_path / "x.kiln", dtype="float32", **options)
    assert not (tmp_path / "x.kiln").exists()


def test_an_export_that_would_not_load_writes_nothing(tmp_path):
    import torch

    from kiln.export import export

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    out = tmp_path / "huge.kiln"
    with pytest.raises(kiln.ExportError, match="would not load: .*planned memory exceeds the limit.*dynamic dimension"):
        export(Double(), (torch.zeros(4, 4),), out, dynamic_shapes=({0: torch.export.Dim("n", min=1, max=2**40)},))
    assert list(tmp_path.iterdir()) == []


def _padded_program(tmp_path, logits: int):
    """A random 1-layer Llama with `logits` outputs and the 3-token tokenizer of write_llama_gguf. The rows
    of the real tokens in the output layer are zero and the others random, so that an unmasked
    greedy choice is an id the tokenizer does not have."""
    import torch

    from kiln.llm.export import export_program
    from kiln.llm.model import Llama, LlamaConfig, build_llama

    tokenizer = Tokenizer.from_gguf(str(write_llama_gguf(tmp_path / "tokenizer.gguf")))
    cfg = LlamaConfig(vocab_size=logits, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, hidden_dim=16,
                      rope_theta=10000.0, norm_eps=1e-5, context_length=16, tied_embeddings=False)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in Llama(cfg, 2).named_parameters()}
    gen = torch.Generator().manual_seed(0)
    state = {k: torch.randn(s, generator=gen) for k, s in shapes.items()}
    state["output.weight"][:3] = 0
    model = build_llama(cfg, state, capacity=16, last_logits_only=True)
    config = {"architecture": "llama", "name": "padded", "vocab_size": logits, "context_length": 16,
              "max_tokens_per_call": 4, "bos_id": -1, "eos_id": -1, "add_bos": False, "stop_ids": [],
              "weights": "float32"}
    path = tmp_path / f"padded{logits}.kiln"
    export_program(model, path, max_tokens_per_call=4, context=16,
                   metadata={"kiln.llm.config": json.dumps(config), "kiln.llm.tokenizer": tokenizer.to_json()})
    return path


def test_logits_wider_than_the_tokenizer_are_masked(tmp_path):
    runner = Runner(_padded_program(tmp_path, logits=40))
    for temperature in (0, 1.0):
        text = runner.generate("abab", max_new_tokens=6, temperature=temperature, top_k=0, top_p=1.0, min_p=0.0,
                               seed=1)
        assert runner.stats.finish_reason == "max_new_tokens" and len(runner.generated_tokens) == 6
        assert all(0 <= t < 3 for t in runner.generated_tokens), runner.generated_tokens
        assert text == runner.tokenizer.decode(runner.generated_tokens)


def test_a_tokenizer_wider_than_the_logits_is_refused(tmp_path):
    with pytest.raises(kiln.InvalidProgram, match="the tokenizer has 3 tokens but the model only 2 logits"):
        Runner(_padded_program(tmp_path, logits=2))
