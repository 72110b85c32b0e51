"""The bench plots (PNG, matplotlib Agg), drawn from the raw figures the bench scripts saved.

Usage: ``.venv/bin/python benches/plots.py``

Reads ``data/bench/results/{scaling,threads,modes,xrepo}.json`` (written by ``scaling.py``, ``threads.py``,
``modes.py`` and ``xrepo.py``) and writes, under ``benches/``:

- ``scaling_latency.png``: query latency (p50, p99) against corpus size, per engine, log-log;
- ``scaling_build.png``: build time against corpus size, per engine and for the whole ``fastrag index``, log-log,
  with a linear reference;
- ``scaling_memory.png``: index size on disk and peak RSS while building, against corpus size;
- ``recall_modes.png``: recall@k, k = 1 … 10, of the lexical, vector and hybrid modes, docs and code sets;
- ``threads.png``: time at 1 and 2 threads or workers per parallel stage;
- ``xrepo_languages.png``: NDCG@10 per language on the xrepo benchmark, fastrag beside semble (``xrepo.py``).

Drawn with matplotlib's object API (``Figure``, rendered by Agg; pyplot is never imported). A plot whose
figures are missing is skipped with a note on stderr; the script fails (status 1) only when no figures exist
at all. Every PNG is written atomically (temporary file, then renamed).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import ROOT, shown
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from report import load_figures, say

OUT_DIR = ROOT / "benches"
ENGINE_COLORS = {
    "fastrag": "tab:red",
    "bm25s": "tab:blue",
    "tantivy": "tab:green",
    "fastrag index": "tab:purple",
    "semble": "tab:orange",
}
MODE_COLORS = {"lexical": "tab:red", "vector": "tab:blue", "hybrid": "tab:purple"}
SET_STYLES = {"docs": "-", "code": "--"}
#: Metadata without the software version, so that a re-run with the same figures gives the same bytes.
PNG_METADATA = {"Software": None}


def save(fig: Figure, name: str) -> Path:
    """Write ``fig`` to ``benches/<name>`` atomically (Agg renders it: no pyplot, no display)."""
    path = OUT_DIR / name
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".png", dir=OUT_DIR)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata=PNG_METADATA)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _tokens(scaling: dict[str, Any]) -> dict[str, float]:
    """Millions of tokens of each size (the x axis of every scaling plot)."""
    return {f: scaling["sizes"][f]["tokens"] / 1e6 for f in scaling["sizes"]}


def _size_axis(ax: Axes, scaling: dict[str, Any]) -> None:
    """Log-log axes with one tick per corpus size, labelled ``1×`` … and the token count."""
    tokens = _tokens(scaling)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(tokens.values()))
    ax.set_xticklabels([f"{f}×\n{t:.0f} M" for f, t in tokens.items()])
    ax.minorticks_off()
    ax.set_xlabel("corpus size (copies of vLLM, tokens)")
    ax.grid(True, which="major", alpha=0.3)


def _exp(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}"


def plot_latency(scaling: dict[str, Any]) -> Path:
    """p50 (solid) and p99 (dotted) single-query latency per engine against corpus size."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    tokens = _tokens(scaling)
    xs = [tokens[f] for f in tokens]
    summary = scaling["summary"]
    for engine, p50 in summary["p50_us"].items():
        color = ENGINE_COLORS.get(engine)
        e50, e99 = summary["exponents"][engine]["p50"], summary["exponents"][engine]["p99"]
        ax.plot(xs, [p50[f] for f in tokens], "o-", color=color, label=f"{engine} p50 (∝ size^{_exp(e50)})")
        p99 = summary["p99_us"][engine]
        ax.plot(xs, [p99[f] for f in tokens], "s:", color=color, alpha=0.6, label=f"{engine} p99 (∝ size^{_exp(e99)})")
    _size_axis(ax, scaling)
    ax.set_ylabel("latency per query, µs (top 10)")
    ax.set_title(f"BM25 query latency vs corpus size ({scaling['latency']['queries']} public questions)")
    ax.legend(fontsize=8, ncol=2)
    return save(fig, "scaling_latency.png")


def plot_build(scaling: dict[str, Any]) -> Path:
    """Build time per engine, and the whole ``fastrag index`` wall time, against corpus size (log-log)."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    tokens = _tokens(scaling)
    xs = [tokens[f] for f in tokens]
    exps = scaling["summary"]["exponents"]
    for engine, builds in scaling["builds"].items():
        ys = [builds[f]["build_s"] for f in tokens]
        label = f"{engine} BM25 build (∝ size^{_exp(exps[engine]['build'])})"
        ax.plot(xs, ys, "o-", color=ENGINE_COLORS.get(engine), label=label)
    timed = [f for f in tokens if f in scaling["index"]]
    if timed:
        label = f"`fastrag index`, whole pipeline (∝ size^{_exp(exps['fastrag index']['wall'])})"
        walls = [scaling["index"][f]["wall_s"] for f in timed]
        ax.plot([tokens[f] for f in timed], walls, "D--", color=ENGINE_COLORS["fastrag index"], label=label)
        first = timed[0]
        ref = [walls[0] * tokens[f] / tokens[first] for f in tokens]
        ax.plot(xs, ref, color="grey", linewidth=0.8, alpha=0.6, label="linear (from `fastrag index` at 1×)")
    _size_axis(ax, scaling)
    ax.set_ylabel("seconds")
    ax.set_title("Index build time vs corpus size (same chunks and tokens)")
    ax.legend(fontsize=8)
    return save(fig, "scaling_build.png")


def plot_memory(scaling: dict[str, Any]) -> Path:
    """Index size on disk and peak RSS while building, per engine, against corpus size."""
    fig = Figure(figsize=(11, 4.5))
    left, right = fig.subplots(1, 2)
    tokens = _tokens(scaling)
    xs = [tokens[f] for f in tokens]
    for engine, builds in scaling["builds"].items():
        color = ENGINE_COLORS.get(engine)
        left.plot(xs, [builds[f]["size_bytes"] / 1e6 for f in tokens], "o-", color=color, label=engine)
        right.plot(xs, [builds[f]["peak_mb"] for f in tokens], "o-", color=color, label=f"{engine} (build process)")
    timed = [f for f in tokens if f in scaling["index"]]
    if timed:
        color = ENGINE_COLORS["fastrag index"]
        left.plot([tokens[f] for f in timed], [scaling["index"][f]["index_bytes"] / 1e6 for f in timed], "D--",
                  color=color, label="`fastrag index` generation (all files)")  # fmt: skip
        right.plot([tokens[f] for f in timed], [scaling["index"][f]["peak_mb"] for f in timed], "D--",
                   color=color, label="`fastrag index` process")  # fmt: skip
    right.axhline(3072, color="grey", linewidth=0.8, linestyle=":", label="3 GB (E3)")
    for ax, title, unit in ((left, "Index size on disk", "MB"), (right, "Peak RSS while building", "MB")):
        _size_axis(ax, scaling)
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.legend(fontsize=8)
    return save(fig, "scaling_memory.png")


def plot_modes(modes: dict[str, Any]) -> Path:
    """recall@k curves of every search mode, docs (solid) and code (dashed)."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for mode, sets in modes["recall"].items():
        for name, curve in sets.items():
            ks = sorted(int(k) for k in curve)
            ax.plot(ks, [curve[str(k)] for k in ks], SET_STYLES.get(name, "-"), marker="o", markersize=3,
                    color=MODE_COLORS.get(mode), label=f"{mode}, {name}")  # fmt: skip
    ax.set_xlabel("k (spans retrieved)")
    ax.set_ylabel("recall@k (same file, IoU > 0.05)")
    ax.set_xticks(range(1, 11))
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title("recall@k by search mode, public questions (index with `--vectors docs`)")
    ax.legend(fontsize=8, ncol=3, loc="lower right")
    return save(fig, "recall_modes.png")


def plot_threads(threads: dict[str, Any]) -> Path:
    """Best time at 1 and 2 threads (or workers) per stage, as bars relative to 1 thread, with the times."""
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    stages = list(threads["times_s"])
    width = 0.38
    for i, n in enumerate(("1", "2")):
        rel = [min(threads["times_s"][s][n]) / min(threads["times_s"][s]["1"]) for s in stages]
        bars = ax.bar([x + (i - 0.5) * width for x in range(len(stages))], rel, width, label=f"{n} thread(s)/worker(s)")
        for bar, stage in zip(bars, stages):
            seconds = min(threads["times_s"][stage][n])
            text = f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels(stages)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":", label="perfect 2× speed-up")
    ax.set_ylabel("time relative to 1 (lower is faster)")
    ax.set_title(f"1 vs 2 threads on 2 shared cores (other load {threads['foreign_cores']:.1f} cores)")
    ax.legend(fontsize=8)
    return save(fig, "threads.png")


def plot_xrepo(xrepo: dict[str, Any]) -> Path:
    """NDCG@10 per language, fastrag beside semble's BM25 mode of the same run, semble's published figure as a tick."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.subplots()
    langs = list(xrepo["languages"])
    width = 0.4
    for i, (engine, label) in enumerate((("fastrag", "fastrag"), ("semble", "semble BM25 (same run)"))):
        values = [xrepo["languages"][lang][engine] or 0.0 for lang in langs]
        ax.bar([x + (i - 0.5) * width for x in range(len(langs))], values, width, label=label,
               color=ENGINE_COLORS[engine])  # fmt: skip
    published = [xrepo["languages"][lang]["published"] for lang in langs]
    shown_at = [(x, v) for x, v in enumerate(published) if v is not None]
    ax.scatter([x for x, _ in shown_at], [v for _, v in shown_at], marker="_", s=200, color="black",
               label="semble published (hybrid)", zorder=3)  # fmt: skip
    ax.set_xticks(range(len(langs)))
    ax.set_xticklabels([f"{lang} ({xrepo['languages'][lang]['repos']})" for lang in langs], fontsize=7, rotation=35,
                       ha="right")  # fmt: skip
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("NDCG@10 (mean of the language's repositories)")
    mean = xrepo["mean"]
    ax.set_title(f"xrepo, {len(xrepo['repos'])} repositories: fastrag {mean['fastrag']:.3f}, semble BM25 "
                 f"{mean['semble']:.3f} (mean over repositories)", fontsize=9)  # fmt: skip
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", ncol=3)
    return save(fig, "xrepo_languages.png")


PLOTS: tuple[tuple[str, Callable[[dict[str, Any]], Path]], ...] = (
    ("scaling", plot_latency),
    ("scaling", plot_build),
    ("scaling", plot_memory),
    ("modes", plot_modes),
    ("threads", plot_threads),
    ("xrepo", plot_xrepo),
)


def main() -> int:
    """Draw every plot whose figures exist; status 1 when none do."""
    drawn = 0
    for source, plot in PLOTS:
        figures = load_figures(source)
        if figures is None:
            say(f"plots.py: no {source} figures (run benches/{source}.py): {plot.__name__} skipped")
            continue
        path = plot(figures)
        drawn += 1
        say(f"wrote {shown(path)}")
    if drawn == 0:
        print("plots.py: error: no bench figures in data/bench/results: run the bench scripts first", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
