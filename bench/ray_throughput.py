"""MiniLM embeddings on Ray Data: kiln (kiln.ray) against eager PyTorch in the same pipeline, same run.

    python bench/ray_throughput.py [--rows 3000] [--actors 1,2] [--markdown]

The pipeline is examples/ray/embed.py's: generated sentences in a parquet file
-> tokenize (Hugging Face tokenizers, one actor) -> the model stage (N actors,
1 CPU each, batches of 64 rows) -> rows counted in the driver. The model stage
is kiln.ray.Predictor on the exported MiniLM, or `EagerMiniLM`: the zoo's
PyTorch model (tests/zoo/minilm.py) with torch.set_num_threads(1), padding
each batch the same way. For each actor count both run in turn on one local
cluster; the embeddings of the two are compared row by row.

rows/s "steady" counts the rows after the first batch reached the driver over
the time since then (actors started, weights loaded); "wall" is rows over the
whole execution, actor start-up included. On a shared machine compare the
ratios of one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kiln.ray

REPO = Path(__file__).resolve().parents[1]
BATCH = 64


def load_embed_example():
    """examples/ray/embed.py as a module (the pipeline, the export and the sentence generator)."""
    spec = importlib.util.spec_from_file_location("kiln_ray_embed_example", REPO / "examples" / "ray" / "embed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class EagerMiniLM:
    """The model stage in eager PyTorch: tests/zoo's MiniLM, loaded once per actor."""

    def __init__(self, tests_dir: str, threads: int = 1):
        import torch

        sys.path.insert(0, tests_dir)
        from zoo import minilm

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = minilm.load_minilm()

    def __call__(self, batch: dict) -> dict:
        ids, mask = (_pad(batch[c]) for c in ("input_ids", "attention_mask"))
        with self.torch.inference_mode():
            y = self.model(self.torch.from_numpy(ids), self.torch.from_numpy(mask)).numpy()
        return {"embedding": y, "id": batch["id"]}


def _pad(rows) -> np.ndarray:
    """Rows of token ids of different lengths -> one [rows, longest] int64 array, zero-padded."""
    out = np.zeros((len(rows), max(len(r) for r in rows)), np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def start_cluster(num_cpus: int, *modules) -> None:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False,
             logging_level="ERROR")
    ray.data.DataContext.get_current().enable_progress_bars = False
    for module in modules:  # classes of these modules go to the workers by value (__main__'s always do)
        if module.__name__ != "__main__":
            ray.cloudpickle.register_pickle_by_value(module)


def model_stage(ds, runtime: str, program: Path, actors: int, embed):
    if runtime == "kiln":
        return embed.embed_pipeline(ds, program, actors=actors, keep=("id",))
    ds = ds.repartition(target_num_rows_per_block=BATCH)
    ds = ds.map_batches(embed.Tokenize, fn_constructor_args=(embed.tokenizer_file(), "sentence"),
                        batch_size=BATCH, **kiln.ray.actor_pool(1))
    return ds.map_batches(EagerMiniLM, fn_constructor_args=(str(REPO / "tests"), 1), num_cpus=1, batch_size=BATCH,
                          **kiln.ray.actor_pool(actors))


def run(runtime: str, source: Path, program: Path, actors: int, embed) -> tuple:
    """(steady rows/s, wall rows/s, {id: embedding}) of one execution of the pipeline."""
    import ray

    ds = model_stage(ray.data.read_parquet(str(source)), runtime, program, actors, embed)
    start = time.perf_counter()
    first = None
    rows_after_first = 0
    out = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        if first is None:
            first = time.perf_counter()
        else:
            rows_after_first += len(batch["id"])
        out.update(zip(batch["id"].tolist(), batch["embedding"]))
    end = time.perf_counter()
    return rows_after_first / max(end - first, 1e-9), len(out) / (end - start), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--actors", default="1,2", help="actor counts, comma-separated")
    parser.add_argument("--keep", type=Path, help="directory for the program and the sentences (default: a temp dir)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    counts = [int(a) for a in args.actors.split(",")]

    embed = load_embed_example()
    work = args.keep or Path(tempfile.mkdtemp(prefix="kiln-ray-bench-"))
    source = embed.generate_sentences(work / "sentences.parquet", args.rows)
    program = embed.export_minilm(work / "minilm.kiln")
    start_cluster(max(counts) + 2, embed, sys.modules[__name__])
    import ray

    results = []
    try:
        for actors in counts:
            kiln_steady, kiln_wall, kiln_out = run("kiln", source, program, actors, embed)
            torch_steady, torch_wall, torch_out = run("torch", source, program, actors, embed)
            assert kiln_out.keys() == torch_out.keys() == set(range(args.rows))
            err = max(float(np.abs(kiln_out[i] - torch_out[i]).max()) for i in kiln_out)
            results.append((actors, kiln_steady, torch_steady, kiln_wall, torch_wall, err))
            print(f"{actors} actor(s): kiln {kiln_steady:.0f} rows/s, torch {torch_steady:.0f} rows/s "
                  f"(ratio {kiln_steady / torch_steady:.2f}); wall {kiln_wall:.0f} vs {torch_wall:.0f}; "
                  f"max |kiln - torch| {err:.1e}", flush=True)
    finally:
        ray.shutdown()

    print(f"\nMiniLM, {args.rows} generated sentences (5-30 tokens), batches of {BATCH}, 1 CPU per actor, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    if args.markdown:
        print("\n| actors | kiln rows/s | eager PyTorch rows/s | kiln / PyTorch | wall rows/s, kiln / PyTorch "
              "(start-up included) | max abs difference |")
        print("|---|---|---|---|---|---|")
        for actors, ks, ts, kw, tw, err in results:
            print(f"| {actors} | {ks:.0f} | {ts:.0f} | {ks / ts:.2f}x | {kw:.0f} / {tw:.0f} | {err:.1e} |")
    else:
        print(f"{'actors':>6} {'kiln rows/s':>12} {'torch rows/s':>13} {'ratio':>6} {'wall kiln':>10} "
              f"{'wall torch':>11}")
        for actors, ks, ts, kw, tw, _err in results:
            print(f"{actors:>6} {ks:>12.0f} {ts:>13.0f} {ks / ts:>6.2f} {kw:>10.0f} {tw:>11.0f}")


if __name__ == "__main__":
    main()
