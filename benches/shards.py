"""Shards: N repositories (copies of vLLM's docs/, without its images) built in-process and on a
local Ray runtime, then searched as one index (python benches/shards.py [--sizes 1,4,16]).

Measures, per N: the build wall time in-process (shards one after another, each chunking on all
cores) and as Ray tasks (one per shard, ``num_cpus`` = the machine's cores; the runtime's start-up
measured apart, once), the update of an unchanged set (fingerprint checks only), the load of all
shards merged with global statistics (:meth:`fastrag._core.Bm25Index.merge`), the search latency
over the public docs questions and the memory of the searching process. Writes the "Shards"
section of benches/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from common import CORPUS, RESULTS, SETS, CpuMeter, machine, percentile, replace_section

from fastrag import _core
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import IndexParams
from fastrag.indexing.catalog import open_index, read_catalog
from fastrag.indexing.generations import load_index
from fastrag.indexing.shards import Repo, build_in_process, build_shards
from fastrag.retrieval.retriever import Retriever

SLICE = "docs"
SKIP = {"assets"}  # images only
HEADING = "## Shards (many repositories, Ray)"


def make_slice(dst: Path) -> tuple[int, int]:
    """vLLM's docs/ (without images) hard-linked under ``dst``; returns (files, bytes)."""
    src = CORPUS / SLICE
    files = size = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and rel.parts[0] not in SKIP:
            target = dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
            files, size = files + 1, size + path.stat().st_size
    return files, size


def repos_of(root: Path, slice_dir: Path, n: int) -> list[Repo]:
    """``n`` repositories, each a symlink to the slice."""
    repos = []
    for i in range(n):
        link = root / f"repos-{n}" / f"r{i:02d}"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(slice_dir, target_is_directory=True)
        repos.append(Repo(f"r{i:02d}", link))
    return repos


def timed_build(repos: list[Repo], index_dir: Path, runner: object) -> float:
    started = time.perf_counter()
    outcomes = build_shards(repos, index_dir, IndexParams(), runner)  # type: ignore[arg-type]
    wall = time.perf_counter() - started
    failed = [o for o in outcomes if o.error]
    if failed:
        raise SystemExit(f"shard build failed: {failed[0]}")
    return wall


def search_figures(index_dir: Path, questions: list[str]) -> dict[str, float]:
    """Load (all shards merged), RSS after load, and per-query latency of lexical search."""
    gc.collect()
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    started = time.perf_counter()
    loaded = open_index(index_dir)
    load = time.perf_counter() - started
    retriever = Retriever(loaded)
    rss = proc.memory_info().rss - rss0
    shards = [load_index(index_dir / s["dir"]).bm25 for s in read_catalog(index_dir) or []]
    started = time.perf_counter()
    _core.Bm25Index.merge(shards)
    merge = time.perf_counter() - started
    retriever.search_many(questions[:5], 10, "lexical")  # warm
    lat = []
    for q in questions:
        t = time.perf_counter()
        retriever.search(q, 10, "lexical")
        lat.append((time.perf_counter() - t) * 1e3)
    return {
        "load_s": load,
        "merge_s": merge,
        "rss_mib": rss / 2**20,
        "p50_ms": statistics.median(lat),
        "p95_ms": percentile(lat, 95),
        "chunks": float(len(loaded.chunks)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--no-write", action="store_true", help="print, do not rewrite RESULTS.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    questions = [q.question for q in load_dataset(SETS["docs"]).rag_questions]
    from fastrag.indexing.distributed import run_tasks, start

    meter = CpuMeter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fastrag-shards-") as tmp:
        root = Path(tmp)
        files, size = make_slice(root / "slice")
        started = time.perf_counter()
        start(num_cpus=os.cpu_count())  # before this process imports Ray (see `start`)
        import ray

        ray_start = time.perf_counter() - started
        # the first tasks also start the worker processes: warm them on a one-shard build
        timed_build(repos_of(root, root / "slice", 1), root / "warm", run_tasks)
        for n in sizes:
            repos = repos_of(root, root / "slice", n)
            inproc = timed_build(repos, root / f"in-{n}", build_in_process)
            on_ray = timed_build(repos, root / f"ray-{n}", run_tasks)
            unchanged = timed_build(repos, root / f"in-{n}", build_in_process)
            fig = search_figures(root / f"in-{n}", questions)
            rows.append((n, inproc, on_ray, unchanged, fig))
            print(
                f"N={n}: in-process {inproc:.2f} s, ray {on_ray:.2f} s, unchanged {unchanged:.2f} s, {fig}", flush=True
            )
            shutil.rmtree(root / f"ray-{n}")
        ray.shutdown()
    foreign = meter.foreign_cores()
    lines = [
        HEADING,
        "",
        (
            "`python benches/shards.py`: N repositories, each a copy of vLLM's `docs/` without its images "
            f"({files} files, {size / 2**20:.1f} MiB), indexed with `index --repos` in-process (shards one after "
            "another, each chunking on all cores) and as Ray tasks on a local runtime (one task per shard, "
            f"`num_cpus` = {os.cpu_count()}; worker processes warm); then all shards loaded and merged with "
            "global statistics and searched with the public docs questions (lexical, k = 10, one query at a time)."
        ),
        "",
        machine(),
        f"- Ray runtime start-up (`ray.init`, local): {ray_start:.1f} s, paid once per `index --ray local` run",
        f"- other processes used {foreign:.2f} cores on average during the run",
        "",
        (
            "| N | chunks | build in-process (s) | build Ray local (s) | Ray / in-process | unchanged update (s) "
            "| load + merge (s) | of which merge (s) | RSS of loaded index (MiB) | search p50 (ms) | search p95 (ms) |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, inproc, on_ray, unchanged, fig in rows:
        lines.append(
            f"| {n} | {fig['chunks']:.0f} | {inproc:.2f} | {on_ray:.2f} | {on_ray / inproc:.2f} | {unchanged:.2f} "
            f"| {fig['load_s']:.3f} | {fig['merge_s']:.3f} | {fig['rss_mib']:.0f} "
            f"| {fig['p50_ms']:.2f} | {fig['p95_ms']:.2f} |"
        )
    body = "\n".join(lines) + "\n"
    print(body)
    if not args.no_write:
        replace_section(RESULTS, HEADING, body)


if __name__ == "__main__":
    main()
