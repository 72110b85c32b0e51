"""Shards with vectors: N repositories (copies of vLLM's docs/serving/) built with ``--vectors docs``
in-process and on a local Ray runtime (planning tasks, one Ray Data embedding stage, finishing tasks),
then hybrid search over the N shards against one index over the same files
(python benches/shard_vectors.py [--sizes 1,4,8]).

The one index gets the shards' embedding caches merged, so it embeds nothing: both search the same
vectors. Hybrid latency is per question of the public docs set, one at a time (query embedding
included, model loaded and warm). Writes the "Shards with vectors" section of benches/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import CORPUS, RESULTS, SETS, CpuMeter, machine, percentile, replace_section

from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.catalog import shard_dir
from fastrag.indexing.embed import model_fingerprint, resolve_model
from fastrag.indexing.shards import Repo, Runner, build_in_process, build_shards
from fastrag.indexing.vectors import CACHE_FILE, EmbeddingCache
from fastrag.retrieval.retriever import FUSION_DEPTH, Retriever

SLICE = "docs/serving"
HEADING = "## Shards with vectors (Ray Data embedding stage, hybrid search across shards)"
DOCS = IndexParams(embed="docs")


def make_repos(root: Path, n: int) -> list[Repo]:
    """``n`` repositories ``root/all-n/rNN``, each a hard-linked copy of the slice."""
    repos = []
    for i in range(n):
        dst = root / f"all-{n}" / f"r{i:02d}"
        for path in sorted((CORPUS / SLICE).rglob("*")):
            if path.is_file():
                target = dst / path.relative_to(CORPUS / SLICE)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
        repos.append(Repo(f"r{i:02d}", dst))
    return repos


def timed_build(repos: list[Repo], index_dir: Path, runner: Runner) -> float:
    started = time.perf_counter()
    outcomes = build_shards(repos, index_dir, DOCS, runner)
    failed = [o for o in outcomes if o.error]
    if failed:
        raise SystemExit(f"shard build failed: {failed[0]}")
    return time.perf_counter() - started


def single_index(repos: list[Repo], shards: Path, target: Path) -> None:
    """One index over the folder of ``repos``, its embedding cache the union of the shards' caches."""
    model = model_fingerprint(resolve_model())
    merged = EmbeddingCache(model)
    for repo in repos:
        merged.entries.update(EmbeddingCache.load(shard_dir(shards, repo.name) / CACHE_FILE, model).entries)
    merged.save(target / CACHE_FILE)
    report = build_index(repos[0].path.parent, target, DOCS, display_root="", progress=False)
    assert report.embedded == 0, report.embedded


def hybrid_latency(index_dir: Path, questions: list[str]) -> tuple[float, float, float, int]:
    """p50 and p95 (ms) of one hybrid search at a time, p50 (ms) of the vector search alone (the
    question already embedded, depth 50 as hybrid fetches), and the index's vector count."""
    retriever = Retriever.open(index_dir)
    retriever.prepare_vectors()
    retriever.search_many(questions[:8], 10, "hybrid")  # warm
    lat = []
    for q in questions:
        started = time.perf_counter()
        retriever.search(q, 10, "hybrid")
        lat.append((time.perf_counter() - started) * 1e3)
    vectors = retriever.index.vectors
    assert vectors is not None
    embedded = retriever._embed_queries()(questions)
    alone = []
    for row in embedded:
        started = time.perf_counter()
        vectors.search(row[None, :], FUSION_DEPTH)
        alone.append((time.perf_counter() - started) * 1e3)
    return statistics.median(lat), percentile(lat, 95), statistics.median(alone), len(vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--no-write", action="store_true", help="print, do not rewrite RESULTS.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    questions = [q.question for q in load_dataset(SETS["docs"]).rag_questions]
    from fastrag.indexing.distributed import run_with_vectors, start

    meter = CpuMeter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fastrag-shard-vectors-") as tmp:
        root = Path(tmp)
        start(num_cpus=os.cpu_count())  # before this process imports Ray (see `start`)
        import ray

        timed_build(make_repos(root / "warm", 1), root / "warm-index", run_with_vectors)  # workers, actors warm
        for n in sizes:
            repos = make_repos(root, n)
            inproc = timed_build(repos, root / f"in-{n}", build_in_process)
            on_ray = timed_build(repos, root / f"ray-{n}", run_with_vectors)
            single_index(repos, root / f"in-{n}", root / f"single-{n}")
            sharded = hybrid_latency(root / f"in-{n}", questions)
            single = hybrid_latency(root / f"single-{n}", questions)
            rows.append((n, inproc, on_ray, sharded, single))
            print(
                f"N={n}: in-process {inproc:.2f} s, ray {on_ray:.2f} s, sharded {sharded}, single {single}", flush=True
            )
        ray.shutdown()
    foreign = meter.foreign_cores()
    lines = [
        HEADING,
        "",
        (
            f"`python benches/shard_vectors.py`: N repositories, each a copy of vLLM's `{SLICE}/`, indexed with "
            "`index --repos --vectors docs` in-process (shards one after another, the model loaded per shard) "
            "and on a warm local Ray runtime (planning tasks, one Ray Data stage embedding every shard's texts in "
            f"batches on actors holding the model, finishing tasks; `num_cpus` = {os.cpu_count()}); then hybrid "
            "search (k = 10, precision stage on, query embedding included) over the N shards and over one index "
            "of the same files with the same vectors, the public docs questions one at a time."
        ),
        "",
        machine(),
        f"- other processes used {foreign:.2f} cores on average during the run",
        "",
        (
            "| N | vectors | build in-process (s) | build Ray local (s) | Ray / in-process "
            "| hybrid p50 shards (ms) | hybrid p50 one index (ms) | hybrid p95 shards (ms) | hybrid p95 one index (ms) "
            "| vector search alone p50, shards / one index (ms) |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, inproc, on_ray, sharded, single in rows:
        lines.append(
            f"| {n} | {sharded[3]} | {inproc:.2f} | {on_ray:.2f} | {on_ray / inproc:.2f} "
            f"| {sharded[0]:.2f} | {single[0]:.2f} | {sharded[1]:.2f} | {single[1]:.2f} "
            f"| {sharded[2]:.3f} / {single[2]:.3f} |"
        )
    body = "\n".join(lines) + "\n"
    print(body)
    if not args.no_write:
        replace_section(RESULTS, HEADING, body)


if __name__ == "__main__":
    main()
