"""compare.py --plot DIR: its latency tables as PNG charts (matplotlib), one panel per model row,
grouped bars per runtime at each thread count, kiln highlighted."""

from __future__ import annotations

from pathlib import Path

KILN_COLOR = "#d9480f"
PEER_COLORS = ["#1c7ed6", "#37b24d", "#7048e8", "#868e96", "#f59f00", "#0ca678", "#ae3ec9"]


def plot_latency(latency: dict, runtimes: list[str], path: Path, title: str) -> Path:
    """latency[row][runtime][threads] = seconds. One panel per row: a group of bars per thread
    count, one bar per runtime (kiln in KILN_COLOR and outlined), ms written on each bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(latency)
    cols = min(3, len(rows))
    nrows = -(-len(rows) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.4 * nrows), squeeze=False)
    colors, peer = {}, iter(PEER_COLORS)
    for name in runtimes:
        colors[name] = KILN_COLOR if name.startswith("kiln") else next(peer)
    for ax, row in zip(axes.flat, rows):
        present = [r for r in runtimes if r in latency[row]]
        threads = sorted({t for r in present for t in latency[row][r]})
        width = 0.8 / max(len(present), 1)
        for i, name in enumerate(present):
            xs = [threads.index(t) + (i - (len(present) - 1) / 2) * width for t in latency[row][name]]
            ys = [latency[row][name][t] * 1e3 for t in latency[row][name]]
            kiln = name.startswith("kiln")
            bars = ax.bar(xs, ys, width, color=colors[name], label=name,
                          edgecolor="black" if kiln else "none", linewidth=1.5 if kiln else 0)
            ax.bar_label(bars, fmt="%.3g", fontsize=6, padding=1,
                         fontweight="bold" if kiln else "normal")
        ax.set_xticks(range(len(threads)), [f"{t} thread{'s' * (t > 1)}" for t in threads])
        ax.set_title(row, fontsize=9)
        ax.set_ylabel("ms per call (median)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.margins(y=0.15)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    handles = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=min(len(handles), 7), fontsize=8,
               frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
