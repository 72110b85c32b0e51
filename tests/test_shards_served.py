"""A sharded index: one vector ranking across shards, and the HTTP and MCP servers reading every shard's
files through its own repository (the Ray Data embedding stage: tests/test_shards.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import linked_project, write_repo
from fastrag.errors import UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.catalog import shard_dir
from fastrag.indexing.generations import load_index
from fastrag.indexing.shards import Repo, build_shards
from fastrag.indexing.vectors import ShardedVectors, VectorIndex
from fastrag.retrieval.retriever import VECTOR_GATE, Hit, Retriever
from fastrag.server.mcp import Tools
from test_server import assert_error, client_for
from test_shards import QUERIES, REPOS

#: Vectors of the docs (Markdown) of every shard.
DOCS = IndexParams(embed="docs")


def make_project(root: Path, params: IndexParams) -> Path:
    """``root/data/raw/<name>`` for every repository of :data:`REPOS`, built as shards into
    ``root/data/processed``; returns ``root``."""
    for name, files in REPOS.items():
        write_repo(root / "data/raw" / name, files)
    repos = [Repo(name, root / "data/raw" / name) for name in REPOS]
    assert all(o.error is None for o in build_shards(repos, root / "data/processed", params))
    return root


@pytest.fixture(scope="module")
def with_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards with vectors (:func:`make_project`), and one index over ``data/raw`` with the same
    vectors into ``single``."""
    root = make_project(tmp_path_factory.mktemp("vectors"), DOCS)
    build_index(root / "data/raw", root / "single", DOCS, display_root="", progress=False)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards without vectors (:func:`make_project`): what the servers read."""
    return make_project(tmp_path_factory.mktemp("lexical"), IndexParams(embed="none"))


def spans(hits: list[list[Hit]]) -> list[list[tuple[str, int, int]]]:
    return [[(h.file_path, h.start, h.end) for h in row] for row in hits]


def test_sharded_vectors_and_hybrid_equal_one_index(with_vectors: Path) -> None:
    sharded, single = Retriever.open(with_vectors / "data/processed"), Retriever.open(with_vectors / "single")
    vectors, whole = sharded.index.vectors, single.index.vectors
    assert isinstance(vectors, ShardedVectors) and isinstance(whole, VectorIndex)
    assert len(vectors.parts) == len(REPOS) and len(vectors) == len(whole) == sharded.index.manifest["vectors"]
    # every chunk's vector, by its id in the merged table: the vectors of one index over the same files
    mine = {base + int(c): f for base, part in vectors.parts for c, f in zip(part.chunk_ids, part._floats)}
    theirs = dict(zip(whole.chunk_ids.tolist(), whole._floats))
    assert mine.keys() == theirs.keys() and all(np.array_equal(mine[c], theirs[c]) for c in mine)

    hybrid = sharded.search_many(QUERIES, 10, "hybrid")
    assert hybrid == single.search_many(QUERIES, 10, "hybrid")
    assert hybrid != sharded.search_many(QUERIES, 10, "lexical")  # the vectors took part in the fusion
    query_vectors = sharded._embed_queries()(QUERIES)
    assert max(row[0][1] for row in vectors.search(query_vectors, 1) if row) >= VECTOR_GATE
    chunks = sharded.index.chunks
    some = bytes(int(chunks.paths[f].startswith(("alpha/", "lora/"))) for f in chunks.file)
    for allowed in (None, some):
        got = sharded.search_many(QUERIES, 10, "vector", allowed=allowed)
        want = single.search_many(QUERIES, 10, "vector", allowed=allowed)
        assert any(got) and spans(got) == spans(want)
        # cosines re-scored over another number of rows may round differently in the last bit (float32),
        # which the ranker's weights carry into the score
        assert [h.score for row in got for h in row] == pytest.approx([h.score for row in want for h in row], abs=1e-6)
    assert all(h.file_path.startswith(("alpha/", "lora/")) for row in got for h in row)


def test_shards_of_other_models_are_refused(with_vectors: Path, tmp_path: Path) -> None:
    from fastrag.indexing.catalog import merge_shards

    shards = [(n, load_index(shard_dir(with_vectors / "data/processed", n))) for n in REPOS]
    shards[0][1].manifest["embed_model"] = "all-MiniLM-L6-v2:another"
    with pytest.raises(UserError, match="vectors of different models"):
        merge_shards(tmp_path, shards)


# ----------------------------------------------------------------------------- servers


def test_http_server_reads_every_shard_through_its_repository(project: Path, tmp_path: Path) -> None:
    client = client_for(project)
    body = client.get("/search", params={"query": "adapter sampling temperature queue", "k": 10}).json()
    results = body["results"]
    assert {r["file_path"].split("/")[0] for r in results} == set(REPOS)
    for r in results:  # text and line numbers, from the shard's own repository
        text = (project / "data/raw" / r["file_path"]).read_text(encoding="utf-8")
        assert r["text"] == text[r["first_character_index"] : r["last_character_index"]] and r["first_line"] >= 1

    span = client.get("/span", params={"path": "lora/lora.md", "start": 0, "end": 6}).json()
    assert span["text"] == "# LoRA" and span["first_line"] == span["last_line"] == 1
    # as strict as for one index: only the index's own names, or paths inside data/ naming them
    assert_error(client.get("/span", params={"path": "lora/../../../etc/passwd", "start": 0, "end": 5}), 400, "'..'")
    assert_error(client.get("/span", params={"path": "/etc/passwd", "start": 0, "end": 5}), 400, "inside data/")
    assert_error(client.get("/span", params={"path": "lora/nope.md", "start": 0, "end": 5}), 400, "inside data/")
    # a real file, but not a name of the index
    not_indexed: dict[str, str | int] = {"path": "data/raw/lora/lora.md", "start": 0, "end": 5}
    assert_error(client.get("/span", params=not_indexed), 404, "not a file of the index")


def test_span_confinement_with_shards_outside_data(tmp_path: Path) -> None:
    """A shard's repository outside ``data/`` is served by its index names; a link from ``data/`` into it
    names no file of the index (404), a link anywhere else is refused (400)."""
    root, outside = linked_project(tmp_path)
    build_shards([Repo("corpus", outside / "corpus")], root / "data/processed", IndexParams())
    client = client_for(root)
    span = client.get("/span", params={"path": "corpus/docs/lora.md", "start": 0, "end": 15})
    assert span.status_code == 200 and span.json()["text"] == "# LoRA adapters"
    linked: dict[str, str | int] = {"path": "data/raw/corpus/docs/lora.md", "start": 0, "end": 5}
    assert_error(client.get("/span", params=linked), 404, "not a file of the index")
    other: dict[str, str | int] = {"path": "data/raw/other/docs/lora.md", "start": 0, "end": 5}
    assert_error(client.get("/span", params=other), 400, "symbolic link")


def test_mcp_tools_read_every_shard_through_its_repository(project: Path) -> None:
    tools = Tools(project / "data/processed", project / "data")
    cwd = os.getcwd()
    os.chdir(project.parent)  # any working directory
    try:
        hits = tools.search("adapter sampling temperature queue", 10, "hybrid", None, None)["hits"]
        assert {h["path"].split("/")[0] for h in hits} == set(REPOS)
        for h in hits:
            text = (project / "data/raw" / h["path"]).read_text(encoding="utf-8")
            assert h["snippet"] and h["snippet"][:20] == " ".join(text[h["start"] : h["end"]].split())[:20]
        first = hits[0]
        read = tools.read_span(first["path"], first["start"], first["end"])
        assert (
            read["text"]
            == (project / "data/raw" / first["path"]).read_text(encoding="utf-8")[first["start"] : first["end"]]
        )
        with pytest.raises(UserError, match="/etc/passwd is not a file of the index"):
            tools.read_span("/etc/passwd", 0, 5)
        with pytest.raises(UserError, match="not a file of the index"):
            tools.read_span("data/raw/lora/lora.md", 0, 5)
        status = tools.index_status()
        assert status["shards"] == sorted(REPOS) and status["files"] == sum(len(f) for f in REPOS.values())
    finally:
        os.chdir(cwd)
        tools.close()
