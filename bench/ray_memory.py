"""Memory of Ray actors running MiniLM through kiln.ray: one copy of a .kiln file per node, measured.

    python bench/ray_memory.py [--actors 1,4] [--markdown]

Starts N actors (1 CPU each) that each hold the model stage of
examples/ray/embed.py's pipeline: kiln.ray.Predictor with the optimized
kernels, the same with the packed-weight cache (docs/memory.md: written once
by this script, mapped by every actor), with kernels="portable", or eager PyTorch (tests/zoo's
MiniLM, bench/ray_throughput.py's EagerMiniLM); a fourth kind loads no model
(the Ray worker's own memory). Each actor embeds the same tokenized batches
(256 generated sentences, twice); then, with all N alive and warm, each reads
its /proc/self/smaps_rollup and /proc/self/smaps: its proportional set size
(PSS: a private page counts whole, a page shared by k processes counts 1/k)
and the PSS and RSS of the .kiln file's mapping alone.
A page of the file that every actor touched counts (1/N) per actor.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import kiln.ray

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ray_throughput  # noqa: E402  (the pipeline pieces and EagerMiniLM)

MB = 1 << 20


def memory(program_path: str) -> dict:
    """This process's PSS, and the PSS / RSS of `program_path`'s mappings, in bytes."""
    pss = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    file_pss = file_rss = 0
    current = None
    real = os.path.realpath(program_path) if program_path else None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                current = fields[5] if len(fields) > 5 else None  # a mapping's header line: its path
            elif real is not None and current == real and fields[0] in ("Pss:", "Rss:"):
                if fields[0] == "Pss:":
                    file_pss += int(fields[1]) * 1024
                else:
                    file_rss += int(fields[1]) * 1024
    return {"pss": pss, "file_pss": file_pss, "file_rss": file_rss}


class Stage:
    """An actor holding one model stage: "kiln", "kiln-cache" (with the packed-weight cache),
    "kiln-portable", "torch", or "none" (a Ray worker
    that imported kiln and loaded no model: the baseline)."""

    def __init__(self, runtime: str, program: str, tests_dir: str, packed_cache: str = ""):
        self.program = program if runtime.startswith("kiln") else ""
        if runtime == "none":
            self.stage, self.packed = (lambda batch: {"embedding": []}), 0
        elif runtime == "torch":
            self.stage = ray_throughput.EagerMiniLM(tests_dir, 1)
            self.packed = 0
        else:
            self.stage = kiln.ray.Predictor(program, input_columns=["input_ids", "attention_mask"],
                                            output_columns=["embedding"], keep_columns=["id"],
                                            pad_ragged={"input_ids": 0, "attention_mask": 0},
                                            kernels="portable" if runtime == "kiln-portable" else "",
                                            packed_cache=packed_cache if runtime == "kiln-cache" else False)
            self.packed = None

    def run(self, batches: list) -> int:
        return sum(len(self.stage(b)["embedding"]) for b in batches)

    def memory(self) -> dict:
        program = self.stage.program if self.packed is None else None
        packed = self.packed if program is None else program.packed_bytes - program.packed_mapped_bytes
        return {**memory(self.program), "packed": packed}


def measure(runtime: str, program: Path, actors: int, batches: list, packed_cache: Path) -> list:
    """The memory readings of `actors` warm actors, taken while all of them are alive."""
    import ray

    cls = ray.remote(num_cpus=1)(Stage)
    pool = [cls.remote(runtime, str(program), str(ray_throughput.REPO / "tests"), str(packed_cache))
            for _ in range(actors)]
    try:
        for _ in range(2):
            ray.get([a.run.remote(batches) for a in pool], timeout=600)
        return ray.get([a.memory.remote() for a in pool], timeout=60)
    finally:
        for a in pool:
            ray.kill(a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actors", default="1,4")
    parser.add_argument("--keep", type=Path, help="directory for the program and the sentences (default: a temp dir)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    counts = [int(a) for a in args.actors.split(",")]

    embed = ray_throughput.load_embed_example()
    work = args.keep or Path(tempfile.mkdtemp(prefix="kiln-ray-mem-"))
    source = embed.generate_sentences(work / "sentences.parquet", 256)
    program = embed.export_minilm(work / "minilm.kiln")
    # "kiln-cache": the packed-weight cache (docs/memory.md), written here once, mapped by every actor.
    packed_cache = work / "packed-cache"
    packed_cache.mkdir(exist_ok=True)
    kiln.load(program, packed_cache=packed_cache).method("forward")
    import pyarrow.parquet as pq

    sentences = pq.read_table(source).to_pydict()
    tokenize = embed.Tokenize(embed.tokenizer_file())
    batches = [tokenize({"id": np.asarray(sentences["id"][i:i + 64]),
                         "sentence": np.asarray(sentences["sentence"][i:i + 64], dtype=object)})
               for i in range(0, 256, 64)]
    ray_throughput.start_cluster(max(counts) + 1, ray_throughput, sys.modules[__name__])
    import ray

    rows = []
    try:
        for runtime in ("none", "kiln", "kiln-cache", "kiln-portable", "torch"):
            for actors in counts:
                per = measure(runtime, program, actors, batches, packed_cache)
                row = (runtime, actors, *(np.mean([p[k] for p in per]) / MB
                                          for k in ("pss", "file_pss", "file_rss", "packed")))
                rows.append(row)
                print(f"{runtime:>13}, {actors} actor(s): PSS {row[2]:.1f} MB per actor, of which the .kiln "
                      f"mapping {row[3]:.1f} MB (resident {row[4]:.1f} MB), private packed weights {row[5]:.1f} MB",
                      flush=True)
    finally:
        ray.shutdown()

    print(f"\nprogram file {program.stat().st_size / MB:.1f} MB; PSS and the file's share averaged over the actors")
    if args.markdown:
        print("\n| model stage | actors | PSS per actor (MB) | of which the .kiln mapping (MB) "
              "| file resident per actor (MB) | private packed weights per actor (MB) |")
        print("|---|---|---|---|---|---|")
        for runtime, actors, pss, fpss, frss, packed in rows:
            print(f"| {runtime} | {actors} | {pss:.0f} | {fpss:.1f} | {frss:.1f} | {packed:.1f} |")


if __name__ == "__main__":
    main()
