"""Sharded indexes: one shard per repository, one ranking across shards, builds in-process or on Ray."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import SAMPLE_FILES, run_cli, write_repo
from fastrag import _core
from fastrag.errors import UsageError, UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.catalog import CATALOG_FILE, open_index, shard_dir
from fastrag.indexing.shards import Repo, build_shards, read_repos
from fastrag.retrieval.retriever import Retriever

NO_RAY = importlib.util.find_spec("ray") is None
NEEDS_RAY = "the ray extra is not installed (`uv sync --extra ray`)"

QUERIES = [
    "How do I load a LoRA adapter at runtime?",
    "sampling temperature top_p",
    "install vllm with pip on a GPU",
    "scheduler queue request",
    "unload_lora_adapter",
]

#: Three repositories of different sizes sharing vocabulary, so that per-shard statistics would
#: rank differently from corpus-wide ones.
REPOS = {
    "alpha": SAMPLE_FILES,
    "beta": {
        "notes/sampling.md": "# Sampling\n\nTemperature and top_p shape sampling. " * 3,
        "src/queue.py": "def add_request(queue, request):\n    queue.append(request)  # scheduler queue\n",
    },
    "lora": {
        "lora.md": "# LoRA\n\nLoad a LoRA adapter with `/v1/load_lora_adapter`; unload it with "
        "`/v1/unload_lora_adapter`. LoRA adapters are loaded at runtime.\n",
    },
}


def write_repos(root: Path) -> Path:
    """The repositories of :data:`REPOS` under ``root/all/<name>``, and ``root/repos.txt`` naming
    them (with a missing one among them)."""
    for name, files in REPOS.items():
        write_repo(root / "all" / name, files)
    (root / "repos.txt").write_text("alpha=all/alpha\n# a comment\n\nall/beta\nmissing=all/missing\nlora=all/lora\n")
    return root / "repos.txt"


def results(retriever: Retriever, k: int = 10) -> list[list[tuple[str, int, int, float]]]:
    """Every query's hits as plain tuples."""
    return [[(h.file_path, h.start, h.end, h.score) for h in hits] for hits in retriever.search_many(QUERIES, k)]


def ranked_paths(out: str) -> list[str]:
    """The file paths of ``search``'s ranked lines (``N. path:start-end  score S``), not its snippet lines."""
    return [line.split()[1].split(":")[0] for line in out.splitlines() if line.split(".")[0].strip().isdigit()]


def test_merge_scores_with_global_statistics() -> None:
    docs = [f"lora adapter {i} " + "word " * (i % 7) for i in range(30)] + ["scheduler queue"] * 5
    whole = _core.Bm25Index.build(docs)
    merged = _core.Bm25Index.merge([_core.Bm25Index.build(docs[:4]), _core.Bm25Index.build(docs[4:])])
    assert merged.num_docs == whole.num_docs and merged.avgdl == whole.avgdl
    assert merged.idf("lora") == whole.idf("lora")
    for q in ["lora adapter", "word scheduler", "queue 3"]:
        assert merged.search(q, 50) == whole.search(q, 50)
    with pytest.raises(ValueError):
        _core.Bm25Index.merge([whole, _core.Bm25Index.build(docs, k1=0.5)])
    with pytest.raises(ValueError):
        _core.Bm25Index.merge([])


def test_read_repos(tmp_path: Path) -> None:
    repos = read_repos(write_repos(tmp_path))
    assert [r.name for r in repos] == ["alpha", "beta", "missing", "lora"]
    assert repos[1].path == tmp_path / "all" / "beta"
    (tmp_path / "twice.txt").write_text("a=x\na=y\n")
    with pytest.raises(UsageError, match="unique"):
        read_repos(tmp_path / "twice.txt")
    (tmp_path / "bad.txt").write_text("../x=y\n")
    with pytest.raises(UsageError, match="bad repository name"):
        read_repos(tmp_path / "bad.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(UserError):
        read_repos(tmp_path / "empty.txt")


def test_sharded_ranking_equals_one_index(tmp_path: Path) -> None:
    """Shards merged at load time rank exactly as one index over a folder of all the repositories."""
    read_repos(write_repos(tmp_path))
    repos = [Repo(name, tmp_path / "all" / name) for name in REPOS]
    outcomes = build_shards(repos, tmp_path / "sharded", IndexParams())
    assert all(o.error is None for o in outcomes)
    build_index(tmp_path / "all", tmp_path / "single", IndexParams(), display_root="", progress=False)
    sharded, single = Retriever.open(tmp_path / "sharded"), Retriever.open(tmp_path / "single")
    assert sharded.index.chunks == single.index.chunks
    got = results(sharded)
    assert got == results(single)
    repos_hit = {path.split("/")[0] for hits in got for path, *_ in hits}
    assert repos_hit == set(REPOS)
    # the names each chunk defines merge in chunk order, scored with corpus-wide statistics too
    mine, theirs = sharded.index.definitions, single.index.definitions
    ids = list(range(len(sharded.index.chunks)))
    defined = mine.score_docs("add_request load_lora_adapter LLMEngine", ids)
    assert mine.num_docs == len(ids) and defined == theirs.score_docs("add_request load_lora_adapter LLMEngine", ids)
    assert sum(score > 0 for score in defined) >= 2
    # a shard's own statistics would give another score: the idf is corpus-wide
    lora_alone = Retriever.open(tmp_path / "sharded" / "shards" / "lora")
    assert lora_alone.index.bm25.idf("lora") != sharded.index.bm25.idf("lora")


#: Questions that ask where something is documented: answered from the heading lines too.
WHERE_QUESTIONS = [
    "Which page covers loading a LoRA adapter at runtime?",
    "Which section describes sampling temperature?",
    "Where in the docs is the scheduler queue described?",
]


def test_sharded_heading_lines_equal_one_index(tmp_path: Path) -> None:
    """The shards' heading lines merge like their chunks: a "which page" question gives the same
    hits, heading lines included, on the shards as on one index over all the repositories."""
    write_repos(tmp_path)
    (tmp_path / "all" / "beta" / "notes" / "queue.md").write_text(
        "# Scheduler\n\n## The scheduler queue\n\nRequests wait in the scheduler queue.\n"
    )
    build_shards([Repo(n, tmp_path / "all" / n) for n in REPOS], tmp_path / "sharded", IndexParams())
    build_index(tmp_path / "all", tmp_path / "single", IndexParams(), display_root="", progress=False)
    sharded, single = Retriever.open(tmp_path / "sharded"), Retriever.open(tmp_path / "single")
    mine, theirs = sharded.index.headings, single.index.headings
    assert len(mine) > 3 and (mine.file, mine.start, mine.end) == (theirs.file, theirs.start, theirs.end)
    assert mine.bm25.num_docs == theirs.bm25.num_docs and mine.bm25.avgdl == theirs.bm25.avgdl
    lines = sharded.heading_hits(WHERE_QUESTIONS, 5)
    assert sorted(lines) == [0, 1, 2] and lines == single.heading_hits(WHERE_QUESTIONS, 5)
    paths = sharded.index.chunks.paths
    assert {paths[f] for f in mine.file} >= {"lora/lora.md", "beta/notes/queue.md"}
    assert lines[0][0].file_path.endswith("/lora.md") and lines[2][0].file_path == "beta/notes/queue.md"
    best = lines[2][0]
    text = (tmp_path / "all" / best.file_path).read_text()
    assert text[best.start : best.end].strip() == "## The scheduler queue"  # a heading line, not a chunk
    assert sharded.search_many(WHERE_QUESTIONS, 10) == single.search_many(WHERE_QUESTIONS, 10)
    # with a filter (the chunk mask), heading lines of other files drop out alike
    allowed = bytes(int(p.startswith("beta/")) for p in (paths[f] for f in sharded.index.chunks.file))
    filtered = sharded.search_many(WHERE_QUESTIONS, 10, allowed=allowed)
    assert all(h.file_path.startswith("beta/") for hits in filtered for h in hits)
    assert filtered == single.search_many(WHERE_QUESTIONS, 10, allowed=allowed)


def test_repo_restricts_and_unknown_names_fail(tmp_path: Path) -> None:
    write_repos(tmp_path)
    build_shards([Repo(n, tmp_path / "all" / n) for n in REPOS], tmp_path / "idx", IndexParams())
    only = Retriever.open(tmp_path / "idx", repos=["lora", "beta"])
    paths = {h.file_path.split("/")[0] for hits in only.search_many(QUERIES, 10) for h in hits}
    assert paths == {"lora", "beta"}
    with pytest.raises(UsageError, match="no shard named nope"):
        open_index(tmp_path / "idx", ["nope"])
    with pytest.raises(UsageError, match="--repo needs"):
        open_index(tmp_path / "idx" / "shards" / "lora", ["lora"])


def test_cli_failing_repository_is_one_line(tmp_path: Path) -> None:
    write_repos(tmp_path)
    result = run_cli("index", "--repos", "repos.txt", "--index_dir", "idx", cwd=tmp_path)
    assert result.code == 1
    assert len(result.err_lines) == 1
    assert result.err_lines[0].startswith("fastrag: error: repository missing:")
    assert "3 of 4 repositories indexed" in result.out
    catalog = json.loads((tmp_path / "idx" / CATALOG_FILE).read_text())
    assert [s["name"] for s in catalog["shards"]] == ["alpha", "beta", "lora"]

    search = run_cli("search", "load a LoRA adapter", "--index_dir", "idx", "--repo", "lora", cwd=tmp_path)
    assert search.code == 0, search.err
    hits = ranked_paths(search.out)
    assert hits and all(h.startswith("lora/") for h in hits)
    # each hit's best line, read through its shard's repository (the search ran in another folder)
    assert "Load a LoRA adapter with `/v1/load_lora_adapter`" in search.out
    both = run_cli("search", "adapter sampling", "--index_dir", "idx", "--repo", "lora", "--repo=beta", cwd=tmp_path)
    assert {path.split("/")[0] for path in ranked_paths(both.out)} == {"lora", "beta"}
    # a bare --repo (last, or before another flag) or an unknown name: one line naming the shards
    for args in (["--repo"], ["--repo", "--k", "3"], ["--repo", "nope"]):
        wrong = run_cli("search", "adapter", "--index_dir", "idx", *args, cwd=tmp_path)
        assert wrong.code == 2 and len(wrong.err_lines) == 1, wrong.err
        assert wrong.err_lines[0].startswith("fastrag: error: ") and "(shards: alpha, beta, lora)" in wrong.err

    # a repository that disappears keeps its last shard; a second run only checks fingerprints
    (tmp_path / "all" / "lora" / "lora.md").rename(tmp_path / "lora.md")
    (tmp_path / "all" / "lora").rmdir()
    again = run_cli("index", "--repos", "repos.txt", "--index_dir", "idx", cwd=tmp_path)
    assert again.code == 1 and len(again.err_lines) == 2
    assert "alpha: 4 files" in again.out and "up to date" in again.out
    catalog = json.loads((tmp_path / "idx" / CATALOG_FILE).read_text())
    assert [s["name"] for s in catalog["shards"]] == ["alpha", "beta", "lora"]

    mixed = run_cli("index", "--repo_path", "all/alpha", "--index_dir", "idx", cwd=tmp_path)
    assert mixed.code == 2 and "holds shards" in mixed.err
    bad = run_cli("index", "--repos", "repos.txt", "--index_dir", "idx", "--ray", "bogus", cwd=tmp_path)
    assert bad.code == 2 and bad.err_lines == [
        "fastrag: error: --ray must be local, auto or ray://host:port, got 'bogus'"
    ]
    alone = run_cli("index", "--repo_path", "all/alpha", "--index_dir", "other", "--ray", "local", cwd=tmp_path)
    assert alone.code == 2 and alone.err_lines == ["fastrag: error: --ray needs --repos"]


def test_server_searches_every_shard_and_sees_a_new_set(tmp_path: Path) -> None:
    import warnings

    from fastrag.server import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    write_repos(tmp_path)
    repos = [Repo(n, tmp_path / "all" / n) for n in REPOS]
    build_shards(repos, tmp_path / "idx", IndexParams())
    client = TestClient(create_app(tmp_path / "idx", tmp_path, None), raise_server_exceptions=False)
    first = client.get("/search", params={"query": "adapter sampling temperature queue", "k": 10}).json()
    assert {r["file_path"].split("/")[0] for r in first["results"]} == set(REPOS)
    assert first["generation"].startswith("shards-")
    (tmp_path / "all" / "beta" / "zanzibar.md").write_text("# Zanzibar\n\nzanzibar ordering\n")
    build_shards(repos, tmp_path / "idx", IndexParams())
    after = client.get("/search", params={"query": "zanzibar", "k": 1}).json()
    assert after["generation"] != first["generation"]
    assert after["results"][0]["file_path"] == "beta/zanzibar.md"


@pytest.mark.skipif(NO_RAY, reason=NEEDS_RAY)
def test_ray_build_equals_in_process(tmp_path: Path) -> None:
    """``index --repos --ray local``: one Ray task per shard, the same index as in-process."""
    write_repos(tmp_path)
    local = run_cli("index", "--repos", "repos.txt", "--index_dir", "ray", "--ray", "local", cwd=tmp_path, timeout=180)
    assert local.code == 1, local.err
    assert [line for line in local.err_lines if line.startswith("fastrag: error:")] == [
        line for line in local.err_lines if "repository missing" in line
    ]
    assert sum("repository missing" in line for line in local.err_lines) == 1
    plain = run_cli("index", "--repos", "repos.txt", "--index_dir", "plain", cwd=tmp_path)
    assert plain.code == 1
    assert results(Retriever.open(tmp_path / "ray")) == results(Retriever.open(tmp_path / "plain"))
    lora = Retriever.open(tmp_path / "ray", repos=["lora"]).search_many(QUERIES, 10)
    assert {h.file_path.split("/")[0] for hits in lora for h in hits} == {"lora"}


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    """A local Ray runtime with one CPU in this process, shared by the tests that drive Ray directly."""
    if NO_RAY:
        pytest.skip(NEEDS_RAY)
    from fastrag.indexing.distributed import start

    start(num_cpus=1)  # before this process imports Ray (see `start`)
    import ray

    yield
    ray.shutdown()


def test_ray_retries_a_dying_task_then_reports_its_repository(tmp_path: Path, ray_runtime: None) -> None:
    from fastrag.indexing.distributed import MAX_RETRIES, run_tasks
    from fastrag.indexing.shards import ShardOutcome, build_shard

    write_repos(tmp_path)
    attempts = tmp_path / "attempts"

    def build(repo: Repo, index_dir: Path, params: IndexParams) -> ShardOutcome:
        if repo.name == "beta":  # its worker process dies, every time
            with open(attempts, "a") as log:
                log.write("x")
            os._exit(1)
        return build_shard(repo, index_dir, params)

    repos = [Repo(n, tmp_path / "all" / n) for n in REPOS]
    outcomes = run_tasks(repos, tmp_path / "idx", IndexParams(), build)
    errors = {o.name: o.error for o in outcomes}
    assert errors["alpha"] is None and errors["lora"] is None
    assert errors["beta"] is not None and errors["beta"].startswith("the build task failed")
    assert attempts.read_text() == "x" * (1 + MAX_RETRIES)


def test_ray_data_embeds_the_vectors_of_every_shard(
    tmp_path: Path, ray_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With vectors on, one Ray Data stage embeds the texts of all the shards: the shards equal those
    built in-process, vector for vector, and an unchanged set embeds nothing."""
    from fastrag.indexing import distributed
    from fastrag.indexing.vectors import CACHE_FILE, ShardedVectors

    write_repos(tmp_path)
    repos = read_repos(tmp_path / "repos.txt")
    docs = IndexParams(embed="docs")
    build_shards(repos, tmp_path / "plain", docs)
    calls: list[int] = []
    stage = distributed.embed_stage

    def counted(texts: list[str], *args: Any) -> dict[str, np.ndarray]:
        calls.append(len(texts))
        return stage(texts, *args)

    monkeypatch.setattr(distributed, "embed_stage", counted)
    outcomes = build_shards(repos, tmp_path / "ray", docs, distributed.run_with_vectors)
    errors = {o.name: o.error for o in outcomes}
    assert (errors.pop("missing") or "").startswith("repository path") and not any(errors.values())
    ray_index, plain = Retriever.open(tmp_path / "ray"), Retriever.open(tmp_path / "plain")
    mine, theirs = ray_index.index.vectors, plain.index.vectors
    assert isinstance(mine, ShardedVectors) and isinstance(theirs, ShardedVectors) and len(mine.parts) == 3
    assert calls == [len(mine)]  # one stage, every text (no two alike here)
    for (base, a), (other, b) in zip(mine.parts, theirs.parts):
        assert base == other and np.array_equal(a.chunk_ids, b.chunk_ids) and np.array_equal(a._floats, b._floats)
    assert all((shard_dir(tmp_path / "ray", r.name) / CACHE_FILE).exists() for r in repos if r.name != "missing")
    for mode in ("hybrid", "vector"):
        assert ray_index.search_many(QUERIES, 10, mode) == plain.search_many(QUERIES, 10, mode)
    again = build_shards(repos, tmp_path / "ray", docs, distributed.run_with_vectors)
    assert calls == calls[:1] and all(o.up_to_date for o in again if o.error is None)
