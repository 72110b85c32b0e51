"""A build with vectors publishes a searchable lexical generation first, then the vectors as the next one
(:mod:`fastrag.indexing.vector_stage`); bad input for the embedding model never costs the lexical index."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, write_repo
from fastrag.errors import UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.embed import DIM, MODEL_NAME, Embedder, ModelFiles
from fastrag.indexing.generations import CURRENT_FILE, current_generation, load_index, read_manifest
from fastrag.indexing.vector_stage import PROGRESS_FILE, VectorStage, unencodable, vector_status
from fastrag.indexing.vectors import CACHE_FILE, USEARCH_FILE, EmbeddingCache
from fastrag.retrieval.retriever import Retriever
from test_robustness import kill_group, start_paused

DOCS = IndexParams(embed="docs")
QUERY = "lora adapter"
#: What the vectors rank lora.md first for.
VQUERY = "load a LoRA adapter at runtime"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder.resolve(cache_dir=tmp_path_factory.mktemp("ov-cache"))


class Failing:
    """An embedder of ``files`` that fails (a stand-in for a crash) on its ``fail_on``-th call."""

    def __init__(self, real: Embedder, fail_on: int = 1, nan_for: str = "") -> None:
        self.real, self.fail_on, self.nan_for, self.calls = real, fail_on, nan_for, 0

    @property
    def files(self) -> ModelFiles:
        return self.real.files

    def embed(self, texts: Sequence[str], max_tokens: int = 128, progress: bool = False) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("crash while embedding")
        out = self.real.embed(texts, max_tokens)
        out[[i for i, t in enumerate(texts) if self.nan_for and self.nan_for in t]] = np.nan
        return out


def status_of(index_dir: Path) -> dict[str, object]:
    """:func:`vector_status` of the live generation."""
    gen = current_generation(index_dir)
    assert gen is not None
    return vector_status(index_dir, gen.name, read_manifest(gen))


def test_the_lexical_generation_comes_first_then_the_vectors(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    seen: list[dict[str, object]] = []

    def searchable(report: object) -> None:
        """Called once the lexical generation is live: a search answers from it, lexically, now."""
        index = load_index(tmp_path / "ix")
        assert not index.has_vectors and index.manifest["vectors_pending"] == 2
        hits = Retriever.open(tmp_path / "ix").search(QUERY, 2)  # hybrid: lexical on this generation
        assert hits and hits[0].file_path == "repo/docs/lora.md"
        seen.append(status_of(tmp_path / "ix"))

    report = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder,
                         on_lexical=searchable)  # fmt: skip
    assert seen and seen[0]["state"] == "building" and seen[0]["pending"] == 2
    assert report.lexical_path is not None and report.path is not None and report.lexical_path != report.path
    assert report.lexical_seconds <= report.seconds and report.vectors == report.embedded == 2
    first, second = read_manifest(report.lexical_path), load_index(tmp_path / "ix")
    assert first["vectors"] == 0 and first["vectors_pending"] == 2
    assert second.path == report.path and second.has_vectors and second.manifest["vectors_pending"] == 0
    assert second.embed_model == embedder.model_id and len(second.chunks) == first["chunks"]
    for name in ("chunks.json", "bm25.bin", "files.json"):  # the same lexical files, linked
        assert os.path.samefile(report.lexical_path / name, second.path / name)
    assert status_of(tmp_path / "ix")["state"] == "ready" and status_of(tmp_path / "ix")["vectors"] == 2
    assert not (tmp_path / "ix" / PROGRESS_FILE).exists()
    assert Retriever.open(tmp_path / "ix").search(VQUERY, 1, mode="vector")[0].file_path == "repo/docs/lora.md"

    # unchanged: nothing embedded, nothing published; a code edit: every vector from the cache, one publication
    again = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    assert again.up_to_date and again.embedded == 0 and current_generation(tmp_path / "ix") == second.path
    (repo / "pkg/engine.py").write_text("def step() -> None:\n    pass\n")
    edit = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder,
                       on_lexical=lambda r: pytest.fail("nothing to embed: one generation"))  # fmt: skip
    assert edit.embedded == 0 and edit.vectors == 2 and edit.path == edit.lexical_path
    assert load_index(tmp_path / "ix").has_vectors


def test_a_crash_during_the_vectors_leaves_the_lexical_generation_live(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    with pytest.raises(RuntimeError, match="crash while embedding"):
        build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=Failing(embedder))
    index = load_index(tmp_path / "ix")
    assert not index.has_vectors and index.manifest["vectors_pending"] == 2
    assert Retriever.open(tmp_path / "ix").search(QUERY, 1)[0].file_path == "repo/docs/lora.md"
    with pytest.raises(UserError, match="no vectors yet"):
        Retriever.open(tmp_path / "ix").search(QUERY, 1, mode="vector")
    # the build is gone (its progress names it, but it no longer embeds): pending, not building
    progress = tmp_path / "ix" / PROGRESS_FILE
    progress.write_text(json.dumps({**json.loads(progress.read_text()), "pid": 2**22 + 1}))
    assert status_of(tmp_path / "ix")["state"] == "pending"
    # the next build, with nothing changed, only finishes the vectors
    report = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    assert not report.up_to_date and report.embedded == 2 and report.lexical_path == index.path
    assert load_index(tmp_path / "ix").has_vectors and status_of(tmp_path / "ix")["state"] == "ready"


def test_killed_after_the_lexical_publication(tmp_path: Path) -> None:
    """``index --vectors docs`` killed once its lexical generation is live: that generation answers
    ``search`` (saying the vectors are pending); the next ``index`` finishes them, the one after embeds nothing."""
    write_repo(tmp_path / "repo")
    proc = start_paused(["index", "--repo_path", "repo", "--vectors", "docs"], tmp_path, "lexical")
    try:
        index_dir = tmp_path / "data/processed"
        assert status_of(index_dir)["state"] == "building"  # the paused build is alive
        paused = run_cli("search", QUERY, "--k", "2", cwd=tmp_path)
        assert paused.code == 0 and "repo/docs/lora.md" in paused.out and "vectors building" in paused.err
        building = run_cli("index_status", cwd=tmp_path)
        assert building.code == 0 and "vectors building: 0 of 2" in building.out, building.out
    finally:
        kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    assert status_of(index_dir)["state"] == "pending" and not load_index(index_dir).has_vectors
    after = run_cli("search", QUERY, "--k", "2", cwd=tmp_path)
    assert after.code == 0 and "repo/docs/lora.md" in after.out and "vectors pending" in after.err
    assert "vectors pending: 2 chunks" in run_cli("index_status", cwd=tmp_path).out
    finish = run_cli("index", "--repo_path", "repo", "--vectors", "docs", cwd=tmp_path)
    assert finish.code == 0, finish.err
    assert "vectors: 2 chunks, 2 embedded" in finish.out
    assert load_index(index_dir).has_vectors and status_of(index_dir)["state"] == "ready"
    done = run_cli("index", "--repo_path", "repo", "--vectors", "docs", cwd=tmp_path)
    assert done.code == 0 and done.out.startswith("index up to date"), done.out
    ready = run_cli("search", QUERY, "--k", "2", cwd=tmp_path)
    assert ready.code == 0 and "vectors" not in ready.err
    status = run_cli("index_status", cwd=tmp_path)
    assert status.code == 0 and "vectors ready: 2 chunks" in status.out and "4 files, 7 chunks" in status.out


def test_status_says_lexical_only(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", IndexParams(embed="none"), display_root="repo", progress=False)
    status = status_of(tmp_path / "ix")
    assert status["state"] == "lexical" and status["vectors"] == 0 and "lexical only" in str(status["note"])
    shown = run_cli("index_status", "--index_dir", str(tmp_path / "ix"), cwd=tmp_path)
    assert shown.code == 0 and "vectors lexical: lexical only" in shown.out, shown.err


def damaged_models(root: Path, embedder: Embedder) -> Path:
    """A models folder whose model file is damaged (its tokenizer is fine)."""
    folder = root / MODEL_NAME
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"\x08\x07not a model at all")
    shutil.copy(embedder.files.tokenizer, folder / "tokenizer.json")
    return root


def test_a_damaged_model_is_one_error_and_the_lexical_index_serves(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    models = damaged_models(tmp_path / "models", embedder)
    with pytest.raises(UserError) as err:
        build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, models_dir=models)
    message = str(err.value)
    assert "\n" not in message and str(models / MODEL_NAME / "model.onnx") in message
    assert "lexical index" in message and "stays live" in message
    assert Retriever.open(tmp_path / "ix").search(QUERY, 1)[0].file_path == "repo/docs/lora.md"
    status = status_of(tmp_path / "ix")
    assert status["state"] == "pending" and "cannot load the embedding model" in str(status["error"])


def test_a_damaged_model_through_the_command_line(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``index --vectors docs`` with a damaged model: one error line naming it, exit 1, no traceback; ``search``
    answers from the lexical generation and says the vectors are pending."""
    write_repo(tmp_path / "repo")
    monkeypatch.setenv("FASTRAG_MODELS_DIR", str(damaged_models(tmp_path / "models", embedder)))
    result = run_cli("index", "--repo_path", "repo", "--vectors", "docs", cwd=tmp_path)
    assert result.code == 1 and "Traceback" not in result.err
    errors = [line for line in result.err_lines if line.startswith("fastrag: error:")]
    assert len(errors) == 1 and "model.onnx" in errors[0], result.err
    assert "searchable now" in result.err
    search = run_cli("search", QUERY, "--k", "2", cwd=tmp_path)
    assert search.code == 0 and "repo/docs/lora.md" in search.out and "vectors pending" in search.err


def test_a_missing_model_publishes_the_lexical_generation(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastrag.indexing import embed as embed_module

    def nothing(*args: object, **kwargs: object) -> ModelFiles:
        raise UserError("no embedding model found: put one in data/models/")

    monkeypatch.setattr(embed_module, "find_model", lambda *a, **k: None)
    monkeypatch.setattr(embed_module, "resolve_model", nothing)
    repo = write_repo(tmp_path / "repo")
    with pytest.raises(UserError, match="no embedding model found.*stays live"):
        build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False)
    assert (tmp_path / "ix" / CURRENT_FILE).exists() and status_of(tmp_path / "ix")["state"] == "pending"
    assert Retriever.open(tmp_path / "ix").search(QUERY, 1)[0].file_path == "repo/docs/lora.md"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("lora \ud800 adapter", "lone surrogates"),
        ("\x00\x01\x02\x03" * 50, "binary-looking"),
        ("x" * 1_000_000, "a line over"),
        ("# LoRA\n\nLoad an adapter.", None),
    ],
)
def test_what_the_model_cannot_encode(text: str, why: str | None) -> None:
    found = unencodable(text)
    assert found == why if why is None else (found or "").startswith(why)


def test_unencodable_chunks_are_skipped_and_counted(embedder: Embedder, tmp_path: Path) -> None:
    texts = ["Load a LoRA adapter at runtime.", "lora \ud800 adapter", "\x00\x01" * 100, "y" * 1_000_000, "odd"]
    stage = VectorStage.prepare(tmp_path, [0, 1, 2, 3, 4], texts, 128, tmp_path / "models", Failing(embedder, 0, "odd"))
    embedded, refused = stage.embed("gen-1-1", tmp_path, Failing(embedder, 0, "odd"), progress=False)
    assert embedded == 2 and refused == 4  # three refused before the model, one it returned no vector for
    index, skipped = stage.index()
    assert index is not None and index.chunk_ids.tolist() == [0] and skipped == 4
    cache = EmbeddingCache.load(tmp_path / CACHE_FILE, embedder.model_id)
    assert len(cache.entries) == 5  # the refused ones too (zero vectors): never tried again
    again = VectorStage.prepare(tmp_path, [0, 1, 2, 3, 4], texts, 128, tmp_path / "models", embedder)
    assert not again.missing


def test_the_embedder_survives_a_text_its_tokenizer_refuses(embedder: Embedder) -> None:
    out = embedder.embed(["Load a LoRA adapter.", "lora \ud800 adapter"], 64)
    assert out.shape == (2, DIM) and np.linalg.norm(out[0]) > 0.99 and not out[1].any()


def test_a_build_skips_what_the_model_cannot_encode(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    (repo / "docs/odd.md").write_text("# Odd\n\nodd-marker text the model returns nothing for.\n")
    model = Failing(embedder, 0, "odd-marker")
    report = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=model)
    assert report.vectors == 2 and report.vectors_skipped == 1
    index = load_index(tmp_path / "ix")
    assert index.manifest["vectors"] == 2 and index.manifest["vectors_skipped"] == 1
    assert (index.path / USEARCH_FILE).is_file() and status_of(tmp_path / "ix")["skipped"] == 1
    model.calls = 0
    (repo / "pkg/engine.py").write_text("def step() -> None:\n    pass\n")
    again = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=model)
    assert again.embedded == 0 and again.vectors_skipped == 1 and model.calls == 0


def test_vectors_of_a_superseded_generation_are_not_published(embedder: Embedder, tmp_path: Path) -> None:
    """Another build publishes while this one embeds: the newer generation stays live (the last wins), and
    the vectors this one made wait in the cache for the next build."""
    repo = write_repo(tmp_path / "repo")
    newer: list[Path] = []

    def meanwhile(report: object) -> None:
        (repo / "pkg/engine.py").write_text("def step() -> None:\n    pass\n")
        inner = build_index(repo, tmp_path / "ix", IndexParams(embed="none"), display_root="repo", progress=False)
        assert inner.path is not None
        newer.append(inner.path)

    report = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder,
                         on_lexical=meanwhile)  # fmt: skip
    assert report.embedded == 2 and report.path == report.lexical_path  # its vectors were not published
    assert current_generation(tmp_path / "ix") == newer[0] and not load_index(tmp_path / "ix").has_vectors
    again = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    assert again.embedded == 0 and again.vectors == 2 and load_index(tmp_path / "ix").has_vectors


def test_index_status_over_mcp_and_http(embedder: Embedder, tmp_path: Path, tiny_gguf: Path) -> None:
    from fastrag.server.mcp import Tools
    from test_server import client_for

    root = tmp_path / "project"
    write_repo(root / "data/raw/repo")
    with pytest.raises(RuntimeError):
        build_index(root / "data/raw/repo", root / "data/processed", DOCS, display_root="data/raw/repo",
                    progress=False, embedder=Failing(embedder))  # fmt: skip
    tools = Tools(root / "data/processed", root / "data", str(tiny_gguf))
    try:
        status = tools.index_status()["vectors_status"]
        assert status["state"] == "pending" and status["pending"] == 2 and status["vectors"] == 0
    finally:
        tools.close()
    with client_for(root, str(tiny_gguf)) as client:
        assert client.get("/healthz").json()["vectors_state"] == "pending"
    build_index(root / "data/raw/repo", root / "data/processed", DOCS, display_root="data/raw/repo",
                progress=False, embedder=embedder)  # fmt: skip
    with client_for(root, str(tiny_gguf)) as client:
        assert client.get("/healthz").json()["vectors_state"] == "ready"


def test_mcp_serves_its_first_index_once_the_lexical_generation_is_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mcp`` building the index it serves returns at the lexical publication; the vectors go on in the
    background and their end is said on stderr."""
    import threading

    from fastrag.cli import places
    from fastrag.indexing import builder
    from fastrag.indexing.records import IndexReport

    release, finished = threading.Event(), threading.Event()

    def slow_build(root: Path, folder: Path, *args: object, on_lexical: object = None, **kwargs: object) -> IndexReport:
        report = IndexReport(4, 7, 4, 0, 0, vectors_pending=2)
        assert callable(on_lexical)
        on_lexical(report)  # the lexical generation is live
        release.wait(30)  # the vectors take a while
        report.vectors = 2
        finished.set()
        return report

    monkeypatch.setattr(builder, "build_index", slow_build)
    places.build_until_searchable(tmp_path / "repo", tmp_path / "ix")  # returns while the build embeds
    assert not finished.is_set() and "searchable now (lexical)" in capsys.readouterr().err
    release.set()
    assert finished.wait(30)
    for _ in range(100):  # the background thread says so once the vectors are published
        if "vectors ready: 2 chunks" in capsys.readouterr().err:
            break
        threading.Event().wait(0.05)
    else:
        pytest.fail("the end of the vectors was not said")

    def lexical_build(root: Path, folder: Path, *args: object, **kwargs: object) -> IndexReport:
        return IndexReport(4, 7, 4, 0, 0)

    monkeypatch.setattr(builder, "build_index", lexical_build)  # nothing to embed: one build, waited for
    places.build_until_searchable(tmp_path / "repo", tmp_path / "ix")
    assert "indexed 4 files into 7 chunks" in capsys.readouterr().err


def test_post_index_serves_the_lexical_generation_while_it_embeds(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``POST /index`` with vectors: while it embeds, the server already searches its lexical generation and
    ``/healthz`` says the vectors are building; the response names both generations."""
    import threading

    from fastrag.server import routes as routes_module
    from test_server import client_for, make_project

    root = make_project(tmp_path)
    client = client_for(root)
    during: list[dict[str, object]] = []
    from fastrag.indexing.builder import build_index as build

    def observed(*args: object, **kwargs: object) -> object:
        def meanwhile(report: object) -> None:
            def ask() -> None:
                found = client.get("/search", params={"query": QUERY, "k": 2}).json()
                during.append({"health": client.get("/healthz").json(), "search": found})

            asker = threading.Thread(target=ask)
            asker.start()
            asker.join(60)

        return build(*args, **kwargs, embedder=embedder, on_lexical=meanwhile)  # type: ignore[arg-type]

    monkeypatch.setattr(routes_module, "build_index", observed)
    response = client.post("/index", json={"repo_path": "data/raw/repo", "vectors": "docs"})
    body = response.json()
    assert response.status_code == 200, body
    assert body["vectors"] == 2 and body["lexical_generation"] != body["generation"]
    (seen,) = during
    health, found = seen["health"], seen["search"]
    assert isinstance(health, dict) and isinstance(found, dict)
    assert health["generation"] == body["lexical_generation"] and health["vectors_state"] == "building"
    assert found["results"] and found["generation"] == body["lexical_generation"]
    after = client.get("/healthz").json()
    assert after["generation"] == body["generation"] and after["vectors_state"] == "ready"
