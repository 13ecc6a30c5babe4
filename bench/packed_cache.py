"""N processes holding one program, without and with the packed-weight cache (docs/memory.md).

Each worker process loads the program (mapped), loads its method, runs it once and then holds it
while the parent reads every worker's proportional set size (PSS, /proc/PID/smaps_rollup) and
their load time; the workers of one mode are alive together. Without a cache every process packs
and holds its own copy of the packed weights; with it, the first writes the cache file and the
others map it. The ratio of total PSS (cache / none) is what sharing saves; the load times show
what packing costs against mapping and hashing.

    python bench/packed_cache.py [--processes 4] [--model file.kiln --shape 4,2048]

Without --model it exports an MLP of four 2048x2048 linears (64 MiB of float32 weights).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

WORKER = textwrap.dedent("""
    import sys, time, numpy as np, kiln
    path, shape = sys.argv[1], tuple(int(d) for d in sys.argv[2].split(","))
    start = time.perf_counter()
    program = kiln.load(path)
    method = program.method()
    loaded = time.perf_counter() - start
    method(np.ones(shape, np.float32))
    print(loaded, program.packed_bytes, program.packed_mapped_bytes, program.packed_cache_report, sep="|",
          flush=True)
    sys.stdin.readline()
""")


def pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))


def run_mode(path: str, shape: str, processes: int, cache: str) -> list:
    env = {k: v for k, v in os.environ.items() if k != "KILN_PACKED_CACHE"}
    if cache:
        env["KILN_PACKED_CACHE"] = cache
    rows, workers = [], []
    try:
        # One after another, so that the first (the cache's writer) has finished before the next loads.
        for _ in range(processes):
            proc = subprocess.Popen([sys.executable, "-c", WORKER, path, shape], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=env)
            workers.append(proc)
            loaded, packed, mapped, report = proc.stdout.readline().rstrip("\n").split("|", 3)
            rows.append({"load_s": float(loaded), "packed": int(packed), "mapped": int(mapped), "report": report})
        time.sleep(0.2)
        for row, proc in zip(rows, workers):
            row["pss_kb"] = pss_kb(proc.pid)
    finally:
        for proc in workers:
            proc.communicate("\n", timeout=60)
    return rows


def export_mlp(directory: str) -> str:
    import torch

    from kiln.export import export

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048, bias=False) for _ in range(4)]).eval()
    path = os.path.join(directory, "mlp.kiln")
    export(model, (torch.randn(4, 2048),), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--model", help="a .kiln file (default: an exported 64 MiB MLP)")
    parser.add_argument("--shape", default="4,2048", help="the float32 input's shape, e.g. 4,2048")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kiln-packed-cache-bench-") as tmp:
        path = args.model or export_mlp(tmp)
        print(f"# {path}: {os.path.getsize(path) / 2**20:.1f} MiB, {args.processes} processes, "
              f"load average {os.getloadavg()[0]:.2f}")
        results = {"none": run_mode(path, args.shape, args.processes, ""),
                   "cache": run_mode(path, args.shape, args.processes, os.path.join(tmp, "cache"))}
        print("| mode | process | load (ms) | packed (MiB) | of which mapped (MiB) | PSS (MiB) | cache |")
        print("|---|---|---|---|---|---|---|")
        for mode, rows in results.items():
            for i, r in enumerate(rows):
                report = r["report"].split(" ", 1)[0] if r["report"] else "-"
                if "; wrote" in r["report"]:
                    report += ", wrote"
                print(f"| {mode} | {i + 1} | {1e3 * r['load_s']:.1f} | {r['packed'] / 2**20:.1f} | "
                      f"{r['mapped'] / 2**20:.1f} | {r['pss_kb'] / 1024:.1f} | {report} |")
        total = {mode: sum(r["pss_kb"] for r in rows) / 1024 for mode, rows in results.items()}
        later = {mode: sorted(r["load_s"] for r in rows[1:])[len(rows[1:]) // 2] if len(rows) > 1 else rows[0]["load_s"]
                 for mode, rows in results.items()}
        print(f"\ntotal PSS: none {total['none']:.1f} MiB, cache {total['cache']:.1f} MiB "
              f"(cache/none {total['cache'] / total['none']:.2f})")
        print(f"median load of processes 2..N: none {1e3 * later['none']:.1f} ms, cache {1e3 * later['cache']:.1f} ms "
              f"(cache/none {later['cache'] / later['none']:.2f})")
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
