"""Greedy text of SmolLM2-135M (the GGUF's 4-bit weights) with a float32 and a 16-bit KV cache.

    python bench/kv_cache_dtype.py [--dtype float16|bfloat16] [--context 2048] [--tokens 200] [--keep DIR]

Exports the program twice with `kiln llm export --kv-cache-dtype` (float32, and --dtype), then
for each prompt generates a greedy chat reply with both and prints whether the texts are equal, or
where they part and both texts around that point. Not a timing: the question is whether the
rounding of keys and values to 16 bits changes what the model says.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import kiln.llm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

PROMPTS = ["Write a short poem about the sea, with rhymes.", "What is the capital of France?",
           "Explain in three sentences why the sky is blue.", "List five prime numbers and say why each is prime."]


def export(gguf: str, out: Path, dtype: str, context: int) -> Path:
    if not out.exists():
        subprocess.run([sys.executable, "-m", "kiln", "llm", "export", gguf, "-o", str(out), "--context", str(context),
                        "--kv-cache-dtype", dtype], check=True, stdout=subprocess.DEVNULL)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=200, help="largest reply, in tokens (default 200)")
    parser.add_argument("--keep", type=Path, help="a directory to keep the exported programs in between runs")
    args = parser.parse_args()
    from zoo import smollm2  # tests/zoo: the GGUF the tests use

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        gguf = str(smollm2.gguf_path())
        paths = [export(gguf, directory / f"smollm2_kv_{d}_{args.context}.kiln", d, args.context)
                 for d in ("float32", args.dtype)]
        runners = [kiln.llm.Runner(p) for p in paths]
        same_count = 0
        for prompt in PROMPTS:
            texts = [r.chat([{"role": "user", "content": prompt}], max_new_tokens=args.tokens, temperature=0)
                     for r in runners]
            if texts[0] == texts[1]:
                same_count += 1
                print(f"{prompt!r}: the same {len(texts[0])} characters")
                continue
            at = next((i for i, (a, b) in enumerate(zip(*texts)) if a != b), min(map(len, texts)))
            print(f"{prompt!r}: parts at character {at}")
            for dtype, text in zip(("float32", args.dtype), texts):
                print(f"  {dtype:>8}: {text[max(0, at - 40):at + 60]!r}")
        print(f"{same_count} of {len(PROMPTS)} replies equal with a {args.dtype} and a float32 KV cache "
              f"(context {args.context}, up to {args.tokens} tokens)")


if __name__ == "__main__":
    main()
