"""Code search on the 41 repositories of ``../shared/xrepo``: fastrag beside semble, NDCG@10 by line overlap.

Usage (``make xrepo`` runs the first)::

    .venv/bin/python benches/xrepo.py [--xrepo ../shared/xrepo] [--repo NAME ...] [--lang L ...]
        [--show_missed] [--no-semble] [--json OUT] [--reuse-index] [--no-write]

Unpacks every tree into ``benches/_work/xrepo/``, indexes each benchmark root with ``python -m fastrag
index`` (shipped defaults, a subprocess: process start included), runs its queries through the shipped
search path (k = 10) and through semble 0.7.0 in BM25 mode in the same invocation, and scores both by the
benchmark's rule (``benches/xrepo_score.py``; ``benches/xrepo_run.py`` runs the engines). Prints the
per-repository table (with semble's published figure), the per-language and per-category means, the
headline mean over repositories, index-time sums and in-process query latency (p50 / p99) of both. With
semble, fastrag's build is also timed in-process as semble's is (``build_index`` into a temporary folder,
imports paid), with the shipped vectors and without: per repository, the like-for-like comparison.

A run of every repository with semble rewrites the ``## Code search on other repositories (xrepo)``
section of ``benches/RESULTS.md``, saves its figures in ``data/bench/results/xrepo.json`` and draws
``benches/xrepo_languages.png``; a partial run (``--repo``, ``--lang``, ``--no-semble``) only prints.
``--json OUT`` writes one record per task and engine (repo, language, category, query, ndcg, targets,
target ranks, top results): what a cross-validation by repository reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import CpuMeter, percentile, shown
from plots import plot_xrepo
from report import header, loadavg, publish, say
from xrepo_run import (
    INDEX_ROOT,
    WORK,
    XREPO,
    build_indexes,
    run_fastrag,
    run_semble,
    short_error,
    time_in_process,
    unpack_trees,
)
from xrepo_score import K, Repo, TaskResult, load_repos, load_tasks, summarize

from fastrag.indexing.storage import write_json_atomic

SECTION = "## Code search on other repositories (xrepo)"
#: The budget of one full run, fastrag and semble, on 2 cores (issue 26).
BUDGET_S = 10 * 60
ENGINES = ("fastrag", "semble")
#: The vectors of fastrag's in-process index builds timed beside semble's: the docs vectors, and none (the
#: shipped default).
IN_PROCESS = ("docs", "none")
#: Results shown per missed task by ``--show_missed``.
MISSED_TOP = 5


@dataclass(slots=True)
class Run:
    """What one invocation measured: each engine's scored tasks, index seconds per repository, latencies."""

    repos: list[Repo]
    results: dict[str, list[TaskResult]] = field(default_factory=dict)
    index_s: dict[str, dict[str, float]] = field(default_factory=dict)
    in_process_s: dict[str, dict[str, float]] = field(default_factory=dict)
    question_latency_s: list[float] = field(default_factory=list)
    latency_s: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)


def select(repos: Sequence[Repo], names: Sequence[str], languages: Sequence[str]) -> list[Repo]:
    """The repositories named (all when none is), of the languages given (all when none is), in file order."""
    known = {r.name for r in repos}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"xrepo: unknown repository {unknown[0]!r} (known: {', '.join(sorted(known))})")
    chosen = [r for r in repos if (not names or r.name in names) and (not languages or r.language in languages)]
    if not chosen:
        raise SystemExit(f"xrepo: no repository of language {', '.join(languages)} among those chosen")
    return chosen


def measure(repos: list[Repo], xrepo_dir: Path, semble: bool, reuse_index: bool) -> Run:
    """Unpack, index and search every repository of ``repos`` with fastrag, then (``semble``) with semble."""
    run = Run(repos)
    tasks = load_tasks(xrepo_dir, repos)
    say(f"xrepo: {len(repos)} repositories, {len(tasks)} queries; unpacking into {shown(WORK)} ...")
    trees = unpack_trees(repos, xrepo_dir)
    say("fastrag: indexing" + (" (reusing unchanged indexes)" if reuse_index else "") + " ...")
    builds = build_indexes(repos, trees, INDEX_ROOT, reuse=reuse_index)
    run.index_s["fastrag"] = {n: b.seconds for n, b in builds.items() if b.seconds is not None}
    run.reused = [n for n, b in builds.items() if b.seconds is None]
    run.errors = {n: b.error for n, b in builds.items() if b.error}
    say("fastrag: searching ...")
    run.latency_s["fastrag"], run.question_latency_s = [], []
    run.results["fastrag"] = run_fastrag(repos, INDEX_ROOT, tasks=tasks, xrepo_dir=xrepo_dir,
                                         latencies=run.latency_s["fastrag"],
                                         question_latencies=run.question_latency_s)  # fmt: skip
    if semble:
        say("semble (BM25, alpha=0): indexing and searching ...")
        run.index_s["semble"], run.latency_s["semble"] = {}, []
        run.results["semble"] = run_semble(
            repos, trees, tasks=tasks, xrepo_dir=xrepo_dir, index_seconds=run.index_s["semble"],
            latencies=run.latency_s["semble"],
        )  # fmt: skip
        say("fastrag: indexing in-process, as semble is timed ...")
        for embed in IN_PROCESS:
            run.in_process_s[embed] = time_in_process(repos, trees, embed)
    return run


# --------------------------------------------------------------------------- figures


def figures(run: Run, published: Mapping[str, float], wall_s: float, meter: CpuMeter | None = None) -> dict[str, Any]:
    """The run's figures as JSON: per repository, language and category, the means, index times, latency;
    ``wall_s`` of the whole run and, from ``meter`` (started with it), its CPU time and the other load."""
    summaries = {e: summarize(r) for e, r in run.results.items()}
    engines = list(summaries)

    def of(engine: str, table: str, key: str) -> float | None:
        return getattr(summaries[engine], table).get(key) if engine in summaries else None

    names = [r.name for r in run.repos]
    indexed = [n for n in names if n not in run.errors and all(n in run.index_s.get(e, {}) for e in run.index_s)]
    repos = [
        {
            "name": r.name,
            "language": r.language,
            **{e: of(e, "repos", r.name) for e in ENGINES},
            "published": published.get(r.name),
            "index_s": {e: run.index_s.get(e, {}).get(r.name) for e in ENGINES},
            "in_process_s": {v: run.in_process_s.get(v, {}).get(r.name) for v in IN_PROCESS},
            "error": run.errors.get(r.name),
        }
        for r in run.repos
    ]
    languages: dict[str, dict[str, Any]] = {}
    for lang in sorted({r.language for r in run.repos}):
        mine = [r.name for r in run.repos if r.language == lang]
        languages[lang] = {
            "repos": len(mine),
            **{e: of(e, "languages", lang) for e in ENGINES},
            "published": _mean([published[n] for n in mine if n in published]),
        }
    tasks = next(iter(run.results.values()), [])
    categories = {
        cat: {"tasks": sum(t.task.category == cat for t in tasks), **{e: of(e, "categories", cat) for e in ENGINES}}
        for cat in sorted({t.task.category for t in tasks})
    }
    return {
        "repos": repos,
        "languages": languages,
        "categories": categories,
        "tasks": len(tasks),
        "mean": {
            **{e: summaries[e].mean if e in summaries else None for e in ENGINES},
            "published": _mean([published[n] for n in names if n in published]),
        },
        "index_s": {e: sum(run.index_s[e].values()) if e in run.index_s else None for e in ENGINES},
        "index_repos": {e: len(run.index_s.get(e, {})) for e in ENGINES},
        "index_s_indexed": {
            e: sum(v for n, v in run.index_s[e].items() if n in indexed) if e in run.index_s else None for e in ENGINES
        },
        "indexed": len(indexed),
        "in_process_s": {v: sum(t.values()) for v, t in run.in_process_s.items()},
        "in_process_not_slower": {
            v: sum(n in run.index_s.get("semble", {}) and sec <= run.index_s["semble"][n] for n, sec in t.items())
            for v, t in run.in_process_s.items()
        },
        "reused": run.reused,
        "latency_ms": {
            e: {"p50": percentile(v, 50) * 1e3, "p99": percentile(v, 99) * 1e3, "queries": len(v)}
            for e, v in run.latency_s.items()
            if v
        },
        "question_latency_ms": {
            "p50": percentile(run.question_latency_s, 50) * 1e3,
            "p99": percentile(run.question_latency_s, 99) * 1e3,
        }
        if run.question_latency_s
        else None,
        "engines": engines,
        "wall_s": wall_s,
        "cpu_s": meter.own_cpu() if meter is not None else None,
        "foreign_cores": meter.foreign_cores() if meter is not None else None,
        "load_after": loadavg(),
    }


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def load_note(figs: Mapping[str, Any]) -> str:
    """The run's own CPU time and the cores other processes kept busy meanwhile (what inflates its wall time)."""
    if figs.get("cpu_s") is None:
        return ""
    return (
        f", {figs['cpu_s']:.0f} s CPU (this process and its index subprocesses); other processes kept "
        f"{figs['foreign_cores']:.1f} of the 2 cores busy on average"
    )


def report_text(figs: Mapping[str, Any], full: bool) -> str:
    """The section (or, for a partial run, the printout): tables of the figures of :func:`figures`."""
    mean, index_s, latency = figs["mean"], figs["index_s"], figs["latency_ms"]
    n_repos = len(figs["repos"])
    verdict = "PASS" if figs["wall_s"] <= BUDGET_S else "FAIL"
    budget = f" (budget of a full run {BUDGET_S} s: **{verdict}**)" if full else ""
    lines = [
        SECTION if full else f"## xrepo: {n_repos} repositories (partial run: not written to RESULTS.md)",
        "",
        (
            "Written by `benches/xrepo.py` (`make xrepo`). semble's public code-search benchmark "
            "(`../shared/xrepo/`: 41 repositories, 19 languages, semble's annotations): NDCG@10 by its rule "
            "(`benches/xrepo_score.py`: a result covers a target when one path ends with the other on `/` and the "
            "lines overlap; binary gains at the first covering rank; ideal = min(10, targets), uncovered ones "
            "included). fastrag: `python -m fastrag index --repo_path ROOT` with the shipped defaults, then "
            "`Retriever.search_many(queries, 10)` in the default mode, as `search_dataset`. semble 0.7.0 (bench "
            "group), same trees, same scorer, same run: `SembleIndex.from_path(root, model_path=DUMMY)`, "
            "`search(q, top_k=10, alpha=0.0)` — its BM25 retrieval and ranking stack, with a local dummy model "
            "(random 8-dimensional vectors over the MiniLM tokenizer). *published*: semble's own hybrid figure "
            "(`semble_published.json`, a model this machine cannot download)."
        ),
        "",
        header(),
        (
            f"- run: {figs['tasks']} queries, {figs['wall_s']:.0f} s wall in all{budget}{load_note(figs)}; load "
            f"average after {figs['load_after']}"
        ),
        "",
        "| | fastrag | semble BM25 (same run) | semble published (hybrid) |",
        "|---|---|---|---|",
        (
            f"| **mean NDCG@10 over {n_repos} repositories** | **{_f(mean['fastrag'])}** "
            f"| **{_f(mean['semble'])}** | {_f(mean['published'])} |"
        ),
    ]
    reused = (
        f"{'; ' if figs['index_repos']['fastrag'] else ''}{len(figs['reused'])} reused, not timed"
        if figs["reused"]
        else ""
    )
    semble_index = "—" if index_s["semble"] is None else f"{index_s['semble']:.2f} s (in-process)"
    timed = figs["index_repos"]["fastrag"]
    fastrag_index = f"{index_s['fastrag']:.2f} s ({timed} subprocesses, process start included" if timed else "— ("
    lines.append(f"| index time, sum over repositories | {fastrag_index}{reused}) | {semble_index} | |")
    if 0 < figs["indexed"] < n_repos:
        both = figs["index_s_indexed"]
        lines.append(
            f"| index time, sum over the {figs['indexed']} repositories fastrag indexes | {_s(both['fastrag'])} s "
            f"| {_s(both['semble'])} s | |"
        )
    for embed, label in zip(IN_PROCESS, ("with docs vectors", "lexical (the shipped default)")):
        total = figs.get("in_process_s", {}).get(embed)
        if total is not None:
            lines.append(
                f"| index time in-process, {label}, sum · repositories no slower than semble | {total:.2f} s"
                f" · {figs['in_process_not_slower'][embed]} of {n_repos} | {semble_index} | |"
            )
    for p in ("p50", "p99"):
        cells = [f"{latency[e][p]:.1f} ms" if e in latency else "—" for e in ENGINES]
        lines.append(f"| query latency {p}, in-process, one query at a time | {cells[0]} | {cells[1]} | |")
    asked = figs.get("question_latency_ms")
    if asked:
        lines.append(
            f"| query latency p50 / p99, each query asked as a full question (`What is …?`: hybrid, the vectors"
            f" too), on the repositories with vectors | {asked['p50']:.1f} / {asked['p99']:.1f} ms | — | |"
        )
    lines += ["", "Per language (mean of its repositories):", "",
              "| language | repos | fastrag | semble BM25 | semble published |", "|---|---|---|---|---|"]  # fmt: skip
    for lang, row in figs["languages"].items():
        lines.append(
            f"| {lang} | {row['repos']} | {_f(row['fastrag'])} | {_f(row['semble'])} | {_f(row['published'])} |"
        )
    lines += ["", "Per category (mean over its queries):", "", "| category | queries | fastrag | semble BM25 |",
              "|---|---|---|---|"]  # fmt: skip
    for cat, row in figs["categories"].items():
        lines.append(f"| {cat} | {row['tasks']} | {_f(row['fastrag'])} | {_f(row['semble'])} |")
    lines += ["", ("Per repository (index seconds: fastrag's `index` subprocess / fastrag in-process, with docs"
                   " vectors / lexical, the shipped default / semble in-process):"), "",
              "| repository | language | fastrag | semble BM25 | semble published | index s |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for row in figs["repos"]:
        note = f" ({short_error(row['error'])})" if row["error"] else ""
        lines.append(
            f"| {row['name']} | {row['language']} | {_f(row['fastrag'])}{note} | {_f(row['semble'])} "
            f"| {_f(row['published'])} | {_s(row['index_s']['fastrag'])} / "
            + "".join(f"{_s(row.get('in_process_s', {}).get(v))} / " for v in IN_PROCESS)
            + f"{_s(row['index_s']['semble'])} |"
        )
    if full:
        lines += ["", "![per-language NDCG@10, fastrag vs semble](xrepo_languages.png)"]
    return "\n".join(lines) + "\n"


def missed_text(run: Run) -> str:
    """Per fastrag task below NDCG 1: the query, each target and its rank, fastrag's first results."""
    semble = {(r.task.repo, r.task.query): r.ndcg for r in run.results.get("semble", [])}
    lines: list[str] = []
    for r in run.results["fastrag"]:
        if r.ndcg >= 1.0:
            continue
        other = semble.get((r.task.repo, r.task.query))
        versus = f", semble {other:.3f}" if other is not None else ""
        lines.append(f"[{r.task.repo} · {r.task.category}] {r.task.query!r}: NDCG@10 {r.ndcg:.3f}{versus}")
        for target, rank in zip(r.task.targets, r.ranks):
            where = f":{target.start_line}-{target.end_line}" if target.has_lines else ""
            lines.append(f"    target {target.path}{where}: {'rank ' + str(rank) if rank else f'not in top {K}'}")
        for i, span in enumerate(r.spans[:MISSED_TOP], 1):
            lines.append(f"    {i}. {span}")
    return "\n".join(lines)


def task_records(run: Run) -> list[dict[str, Any]]:
    """One JSON record per engine and task (``--json``)."""
    return [{"engine": e, **r.as_json()} for e, results in run.results.items() for r in results]


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xrepo", type=Path, default=XREPO, help="the benchmark folder (default: ../shared/xrepo)")
    parser.add_argument("--repo", action="append", default=[], metavar="NAME", help="only this repository (repeatable)")
    parser.add_argument("--lang", action="append", default=[], metavar="L", help="only this language (repeatable)")
    parser.add_argument("--show_missed", "--show-missed", action="store_true",
                        help="print every fastrag query below NDCG 1: targets, their ranks, the top 5")  # fmt: skip
    parser.add_argument("--no-semble", dest="semble", action="store_false", help="fastrag only")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write one record per task and engine to OUT")
    parser.add_argument("--reuse-index", "--reuse_index", action="store_true",
                        help="keep an index whose tree and fastrag build are unchanged since it was built")  # fmt: skip
    parser.add_argument("--no-write", dest="write", action="store_false", help="never rewrite benches/RESULTS.md")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark as the command line asks; status 0."""
    args = parse_args(argv)
    started, meter = time.perf_counter(), CpuMeter()
    if not (args.xrepo / "repos.json").is_file():
        raise SystemExit(f"xrepo: no benchmark at {args.xrepo} (repos.json missing): pass --xrepo DIR")
    every = load_repos(args.xrepo)
    repos = select(every, args.repo, args.lang)
    run = measure(repos, args.xrepo, args.semble, args.reuse_index)
    published = json.loads((args.xrepo / "semble_published.json").read_text())["ndcg10"]
    figs = figures(run, published, time.perf_counter() - started, meter)
    full = len(repos) == len(every) and args.semble
    if args.show_missed:
        print(missed_text(run))
    if args.json is not None:
        write_json_atomic(args.json, task_records(run), indent=1)
        say(f"wrote {len(task_records(run))} task records to {args.json}")
    text = report_text(figs, full)
    if full:
        publish("xrepo", figs, SECTION, text, write=args.write)
        if args.write:
            say(f"wrote {shown(plot_xrepo(figs))}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
