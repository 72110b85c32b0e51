"""Scaling with corpus size: fastrag, bm25s and tantivy on vLLM replicated 1×, 2×, 4× and 8×.

Usage: ``.venv/bin/python benches/scaling.py [--factors 1 2 4 8] [--fraction 0.3] [--rounds 3] [--keep] [--no-write]``

1. **Corpus.** Copy ``k`` of vLLM 0.10.1 (every file fastrag indexes) is written under ``copy{k}/``; copy 0 is
   the original, and in copy ``k ≥ 1`` a deterministic share (``--fraction``) of the identifier-like names is
   respelled, the same way in every file and in the paths (``load_lora_adapter`` → ``load_lora_kilusem``: same
   length and shape, a new term), so that the vocabulary grows with the corpus as it would with more code, not
   just the counts, while every copy keeps the original's size. The ``f×`` corpus is
   copies ``0 … f−1`` (hard links), under ``data/bench/scaling/`` (removed at the end unless ``--keep``).
2. **Full pipeline.** ``python -m fastrag index`` of each corpus in its own process: wall time, peak RSS, index
   size on disk.
3. **Same documents, same tokens.** The chunks of the 8× index, as fastrag indexes them (path, context, span),
   are tokenized once with fastrag's tokenizer; the ``f×`` documents are the first copies' chunks. fastrag builds
   from the texts (its build includes tokenizing); bm25s (numpy backend) and tantivy (whitespace-tokenized
   field) get the token lists, as in ``benches/peers.py``.
4. **Build, size, memory.** Each engine builds and saves each size in a fresh process: build time, save time,
   size on disk, peak RSS (above the process's baseline with its inputs loaded, and absolute).
5. **Load and latency.** One process loads every saved index (load time), then times single queries (the 200
   public questions, top 10) in ``--rounds`` rounds, engines and sizes rotating so that machine load hits all.
6. Growth exponents: least-squares slope of ``log(metric)`` against ``log(tokens)``.

Writes ``data/bench/results/scaling.json`` (for ``plots.py``) and the ``## Scaling with corpus size`` section of
``benches/RESULTS.md``.
"""

from __future__ import annotations
import __future__

import argparse
import builtins
import gc
import hashlib
import json
import keyword
import math
import os
import pickle
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from common import CORPUS, RESULTS, ROOT, SETS, CpuMeter, percentile
from report import (
    BENCH_DIR,
    dir_bytes,
    fit_exponent,
    header,
    loadavg,
    publish,
    run_measured,
    say,
)

from fastrag import _core
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import FileRecord
from fastrag.indexing.corpus import decode, walk
from fastrag.indexing.generations import current_generation
from fastrag.indexing.languages import FILE_NAMES
from fastrag.indexing.texts import indexed_texts

WORK = BENCH_DIR / "scaling"
SECTION = "## Scaling with corpus size"
FACTORS = (1, 2, 4, 8)
ENGINES = ("fastrag", "bm25s", "tantivy")
K = 10
#: Tokenizer settings of ``Bm25Index`` that ``tokenize_batch`` takes.
TOKENIZER_SETTINGS = ("stopwords", "min_len", "parts", "stem")
#: E3 (issue 6): latency at 8× at most 8× the 1× latency; build time linear within ±20%; peak RSS ≤ 3 GB.
MAX_RSS_MB = 3 * 1024

# --------------------------------------------------------------------------- 1. the corpus

#: A name: letters, digits and ``_``, not starting with a digit, at least 4 characters, not part of a longer word.
NAME = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]{3,})(?![A-Za-z0-9_])")
#: Never renamed: Python keywords, builtins and ``__future__`` features (renaming them would change what parses
#: or compiles).
PROTECTED = (
    frozenset(keyword.kwlist)
    | frozenset(keyword.softkwlist)
    | frozenset(dir(builtins))
    | frozenset(__future__.all_feature_names)
)
#: Files in which every (unprotected) name is an identifier; elsewhere only names that look like one.
CODE_SUFFIXES = frozenset({".py", ".pyi", ".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".cuh"})
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
#: The parts of an identifier, as the tokenizer splits it: words, capitalised words, acronyms, digit runs.
PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def respell(name: str, entropy: bytes) -> str:
    """``name`` with the letters of its last part of 3+ letters (else of all its parts) replaced by a
    pronounceable pseudo-word of the same length and letter case: same length and shape (``_``, digits and
    case boundaries stay), so a copy is as large as the original, and a new term per renamed name."""
    parts = [m for m in PARTS.finditer(name) if m.group(0).isalpha()]
    chosen = next((m for m in reversed(parts) if len(m.group(0)) >= 3), None)
    lo, hi = (chosen.start(), chosen.end()) if chosen else (0, len(name))
    out = list(name)
    n = 0
    for i in range(lo, hi):
        if not name[i].isalpha():
            continue
        pool = CONSONANTS if n % 2 == 0 else VOWELS
        letter = pool[entropy[n % len(entropy)] % len(pool)]
        out[i] = letter.upper() if name[i].isupper() else letter
        n += 1
    return "".join(out)


def looks_like_identifier(name: str) -> bool:
    """``snake_case``, ``camelCase``/``PascalCase`` or letters mixed with digits: an identifier even in prose."""
    core = name.strip("_")
    return (
        "_" in core
        or re.search(r"[a-z][A-Z]", core) is not None
        or (re.search(r"[A-Za-z]", core) is not None and re.search(r"[0-9]", core) is not None)
    )


class Renamer:
    """The deterministic renaming of copy ``copy``: a name is renamed with probability ``fraction``
    (decided by a hash of the copy and the name, so consistently across files and paths) and respelled
    by :func:`respell` with letters drawn from the same hash (a new vocabulary term per copy)."""

    def __init__(self, copy: int, fraction: float) -> None:
        self.copy = copy
        self.threshold = int(fraction * 2**64)
        #: name → its name in this copy, one table for code files and one for the others
        self.memo: dict[bool, dict[str, str]] = {True: {}, False: {}}

    def rename(self, name: str, code: bool) -> str:
        """``name`` in this copy (itself when it is not renamed)."""
        memo = self.memo[code]
        found = memo.get(name)
        if found is not None:
            return found
        new = name
        eligible = (
            self.copy > 0
            and name not in PROTECTED
            and not (name.startswith("__") and name.endswith("__"))
            and (code or looks_like_identifier(name))
        )
        if eligible:
            digest = hashlib.blake2b(f"{self.copy}\0{name}".encode(), digest_size=32).digest()
            if int.from_bytes(digest[:8], "little") < self.threshold:
                new = respell(name, digest[8:])
        memo[name] = new
        return new

    def renamed(self) -> int:
        """How many distinct names this copy renamed (in code files or elsewhere)."""
        return len({n for memo in self.memo.values() for n, new in memo.items() if new != n})

    def text(self, text: str, code: bool) -> str:
        """``text`` with its names renamed."""
        if self.copy == 0:
            return text
        parts = NAME.split(text)  # names at the odd positions
        get = self.memo[code].get
        parts[1::2] = [get(n) or self.rename(n, code) for n in parts[1::2]]
        return "".join(parts)

    def path(self, rel_path: str) -> str:
        """``rel_path`` with renamed directory names and file stems (suffixes and special names kept)."""
        parts = rel_path.split("/")
        out = [self.text(p, True) for p in parts[:-1]]
        name = parts[-1]
        if name not in FILE_NAMES:
            stem, dot, suffix = name.rpartition(".")
            name = f"{self.text(stem, True)}.{suffix}" if dot and stem else self.text(name, True)
        return "/".join([f"copy{self.copy}", *out, name])


def generate(root: Path, copies: int, fraction: float) -> dict[str, Any]:
    """Write copies ``0 … copies−1`` of the corpus under ``root/copy{k}/`` (two processes); what was written."""
    jobs = [(root, k, fraction) for k in range(copies)]
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        done = list(pool.map(_generate_copy, jobs))
    return {
        "files": sum(d[0] for d in done),
        "bytes": sum(d[1] for d in done),
        "renamed_names": sum(d[2] for d in done),
        "copy_files": [d[0] for d in done],
        "copy_bytes": [d[1] for d in done],
    }


def _generate_copy(job: tuple[Path, int, float]) -> tuple[int, int, int]:
    """Worker: write copy ``k``; its file count, bytes and distinct renamed names."""
    root, k, fraction = job
    entries, _ = walk(CORPUS)
    renamer = Renamer(k, fraction)
    size = 0
    for entry in entries:
        data = (CORPUS / entry.rel_path).read_bytes()
        text = decode(data)
        if text is not None:
            code = os.path.splitext(entry.rel_path)[1].lower() in CODE_SUFFIXES
            data = renamer.text(text, code).encode("utf-8")
        target = root / renamer.path(entry.rel_path)
        if target.exists():
            raise SystemExit(f"copy {k}: two files renamed to {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        size += len(data)
    return len(entries), size, renamer.renamed()


def link_tree(source: Path, target: Path) -> None:
    """Hard-link every file of ``source`` into the same place under ``target`` (a corpus that shares copies)."""
    for dirpath, _, filenames in os.walk(source):
        dest = target / Path(dirpath).relative_to(source)
        dest.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.link(os.path.join(dirpath, name), dest / name)


# --------------------------------------------------------------------------- 2. full pipeline


def index_corpus(corpus: Path, index_dir: Path) -> dict[str, Any]:
    """``python -m fastrag index`` of ``corpus`` in a fresh process: wall, peak RSS, sizes, counts."""
    cmd = [sys.executable, "-m", "fastrag", "index", "--repo_path", str(corpus), "--index_dir", str(index_dir)]
    run = run_measured(cmd)
    if run.returncode != 0:
        raise SystemExit(f"fastrag index of {corpus} failed:\n{run.stderr[-2000:]}")
    gen = current_generation(index_dir)
    if gen is None:
        raise SystemExit(f"fastrag index of {corpus} left no generation")
    manifest = json.loads((gen / "manifest.json").read_text())
    return {
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "peak_mb": run.peak_mb,
        "files": manifest["files"],
        "chunks": manifest["chunks"],
        "index_bytes": dir_bytes(gen),
        "bm25_bytes": (gen / "bm25.bin").stat().st_size,
        "corpus_bytes": dir_bytes(corpus),
    }


# --------------------------------------------------------------------------- 3. documents and tokens


def prepare_inputs(corpus: Path, index_dir: Path, inputs: Path) -> list[int]:
    """Write, per copy, the texts fastrag indexes and their tokens (space-joined) from the index of
    ``corpus``; also the tokenizer settings and the queries. Returns the number of chunks of each copy."""
    gen = current_generation(index_dir)
    assert gen is not None
    bm25 = _core.Bm25Index.load(str(gen / "bm25.bin"))
    tok_cfg = {key: getattr(bm25, key) for key in TOKENIZER_SETTINGS}
    raw = json.loads((gen / "files.json").read_text())
    records = [FileRecord.from_json(rel, raw[rel]) for rel in sorted(raw)]
    inputs.mkdir(parents=True, exist_ok=True)
    counts: list[int] = []
    doc = 0
    copy = 0
    while True:
        mine = [r for r in records if r.rel_path.startswith(f"copy{copy}/")]
        if not mine:
            break
        texts = indexed_texts(corpus, mine)[0]
        tokens = _core.tokenize_batch(texts, **tok_cfg)
        for i, toks in enumerate(tokens):
            if len(toks) != bm25.doc_len(doc + i):
                raise SystemExit(f"chunk {doc + i}: {len(toks)} tokens, fastrag's index has {bm25.doc_len(doc + i)}")
        _dump(inputs / f"copy{copy}.texts.pkl", texts)
        _dump(inputs / f"copy{copy}.tokens.pkl", [" ".join(t) for t in tokens])
        counts.append(len(texts))
        doc += len(texts)
        copy += 1
    if doc != bm25.num_docs:
        raise SystemExit(f"{doc} chunks read back, the index has {bm25.num_docs}")
    queries = []
    for path in SETS.values():
        for q in load_dataset(path).rag_questions:
            queries.append((q.question, list(dict.fromkeys(bm25.tokenize(q.question)))))
    _dump(inputs / "meta.pkl", {"k1": bm25.k1, "b": bm25.b, "tokenizer": tok_cfg, "queries": queries})
    return counts


def _dump(path: Path, obj: Any) -> None:
    with path.open("wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def _load(path: Path) -> Any:
    with path.open("rb") as f:
        return pickle.load(f)


# --------------------------------------------------------------------------- 4. build probes (subprocess)


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def probe_build(engine: str, factor: int, inputs: Path, out: Path, repeats: int) -> dict[str, Any]:
    """In this (fresh) process: load the ``factor``× inputs, build ``engine`` ``repeats`` times (best time
    kept), save the last build to ``out``; time, peak RSS and size."""
    meta = _load(inputs / "meta.pkl")
    kind = "texts" if engine == "fastrag" else "tokens"
    docs: list[str] = []
    for k in range(factor):
        docs += _load(inputs / f"copy{k}.{kind}.pkl")
    lists: list[list[str]] = []
    if engine == "bm25s":
        # one str object per distinct token, as in peers.py (interned in C: fast)
        lists = [list(map(sys.intern, d.split())) for d in docs]
        docs = []
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS (VmHWM) := current RSS
    base = _status_kb("VmRSS")
    meter = CpuMeter()
    times: list[float] = []
    cpu: list[float] = []
    save_s = 0.0
    for _ in range(repeats):
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        started, cpu_started = time.perf_counter(), time.process_time()
        save = _build(engine, meta, docs, lists, out)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)  # all threads of the process
        started = time.perf_counter()
        save()
        save_s = time.perf_counter() - started
        del save  # the previous build is freed before the next one: one index at a time in the peak
        gc.collect()
    peak, now = _status_kb("VmHWM"), _status_kb("VmRSS")
    return {
        "build_s": min(times),
        "build_runs_s": times,
        "build_cpu_s": min(cpu),
        "build_cpu_runs_s": cpu,
        "save_s": save_s,
        "size_bytes": dir_bytes(out),
        "peak_delta_mb": (peak - base) / 1024,
        "peak_mb": peak / 1024,
        "base_mb": base / 1024,
        "held_mb": (now - base) / 1024,
        "foreign_cores": meter.foreign_cores(),
    }


def _build(engine: str, meta: dict[str, Any], docs: list[str], lists: list[list[str]], out: Path) -> Callable[[], None]:
    """Build ``engine`` in memory (tantivy: on disk); a function that saves it to ``out``."""
    if engine == "fastrag":
        index = _core.Bm25Index.build(docs, k1=meta["k1"], b=meta["b"], **meta["tokenizer"])
        return lambda: index.save(str(out / "bm25.bin"))
    if engine == "bm25s":
        import bm25s

        model = bm25s.BM25(k1=meta["k1"], b=meta["b"], method="lucene", backend="numpy")
        model.index(lists, show_progress=False)
        return lambda: model.save(str(out))
    return _build_tantivy(docs, out)


def _build_tantivy(docs: list[str], out: Path) -> Callable[[], None]:
    """tantivy on disk: space-joined tokens in a ``whitespace`` field (frequencies, no positions); the commit
    and merges are part of the build (its index is written as it is built), so there is nothing to save."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field("id", fast=True)
    index = tantivy.Index(builder.build(), path=str(out))
    writer = index.writer()
    for i, text in enumerate(docs):
        writer.add_document(tantivy.Document(body=text, id=i))
    writer.commit()
    writer.wait_merging_threads()
    return lambda: None


# --------------------------------------------------------------------------- 5. load and latency (subprocess)

Search = Callable[[str, list[str]], list[int]]


def load_engine(engine: str, path: Path) -> Search:
    """Load a saved index of ``engine``; a top-``K`` search of (query text, query tokens)."""
    if engine == "fastrag":
        index = _core.Bm25Index.load(str(path / "bm25.bin"))
        return lambda text, _: list(index.search(text, K)[0])
    if engine == "bm25s":
        import bm25s

        model = bm25s.BM25.load(str(path))

        def bm25s_search(_: str, tokens: list[str]) -> list[int]:
            res = model.retrieve([tokens], k=K, show_progress=False, n_threads=0)
            return [int(d) for d, s in zip(res.documents[0], res.scores[0]) if s > 0]

        return bm25s_search
    import tantivy

    idx = tantivy.Index.open(str(path))
    idx.reload()
    searcher = idx.searcher()
    schema = idx.schema

    def tantivy_search(_: str, tokens: list[str]) -> list[int]:
        if not tokens:
            return []
        terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t, "freq")) for t in tokens]
        hits = searcher.search(tantivy.Query.boolean_query(terms), K, count=False).hits
        return [int(v) for v in searcher.fast_field_values("id", [addr for _, addr in hits]) if v is not None]

    return tantivy_search


def probe_latency(inputs: Path, engines_dir: Path, factors: Sequence[int], rounds: int) -> dict[str, Any]:
    """In this (fresh) process: load every saved index (best of 2 loads), then time single queries in
    ``rounds`` rounds; per engine and size: load time, every latency, and the top-10 overlap with fastrag."""
    queries: list[tuple[str, list[str]]] = _load(inputs / "meta.pkl")["queries"]
    searches: dict[tuple[str, int], Search] = {}
    load_s: dict[str, dict[str, float]] = {e: {} for e in ENGINES}
    for f in factors:
        for e in ENGINES:
            best = float("inf")
            for _ in range(2):
                gc.collect()
                started = time.perf_counter()
                searches[(e, f)] = load_engine(e, engines_dir / f"{e}-x{f}")
                best = min(best, time.perf_counter() - started)
            load_s[e][str(f)] = best
    latency: dict[str, dict[str, list[float]]] = {e: {str(f): [] for f in factors} for e in ENGINES}
    tops: dict[tuple[str, int], list[list[int]]] = {}
    blocks = [(e, f) for f in factors for e in ENGINES]
    meter = CpuMeter()
    for r in range(rounds):
        shift = (r * 5) % len(blocks)
        for e, f in blocks[shift:] + blocks[:shift]:
            search = searches[(e, f)]
            out = latency[e][str(f)]
            results = []
            gc.disable()
            for text, tokens in queries:
                started = time.perf_counter_ns()
                top = search(text, tokens)
                out.append((time.perf_counter_ns() - started) / 1000)
                results.append(top)
            gc.enable()
            tops.setdefault((e, f), results)
    overlap: dict[str, dict[str, float]] = {e: {} for e in ENGINES}
    for (e, f), results in tops.items():
        ref = tops[("fastrag", f)]
        shares = [len(set(a) & set(b)) / len(b) for a, b in zip(results, ref) if b]
        overlap[e][str(f)] = statistics.mean(shares) if shares else float("nan")
    return {
        "load_s": load_s,
        "latency_us": latency,
        "overlap": overlap,
        "queries": len(queries),
        "foreign_cores": meter.foreign_cores(),
    }


def run_probe(args: Sequence[str]) -> dict[str, Any]:
    """Run this script with ``args`` (a probe) in a fresh interpreter; its JSON result, with its peak RSS."""
    run = run_measured([sys.executable, __file__, *args])
    if run.returncode != 0:
        raise SystemExit(f"probe {' '.join(args)} failed:\n{run.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    result["process_peak_mb"] = run.peak_mb
    result["process_wall_s"] = run.wall_s
    return result


# --------------------------------------------------------------------------- 6. report


def summarize(fig: dict[str, Any]) -> dict[str, Any]:
    """Percentiles and growth exponents (against tokens) of the raw figures."""
    factors = [str(f) for f in fig["factors"]]
    tokens = [fig["sizes"][f]["tokens"] for f in factors]
    out: dict[str, Any] = {"p50_us": {}, "p99_us": {}, "exponents": {}}
    for e in ENGINES:
        lat = fig["latency"]["latency_us"][e]
        out["p50_us"][e] = {f: statistics.median(lat[f]) for f in factors}
        out["p99_us"][e] = {f: percentile(lat[f], 99) for f in factors}
        builds = fig["builds"][e]
        series = {
            "build": [builds[f]["build_s"] for f in factors],
            "build CPU": [builds[f]["build_cpu_s"] for f in factors],
            "size": [builds[f]["size_bytes"] for f in factors],
            "peak RSS Δ": [builds[f]["peak_delta_mb"] for f in factors],
            "load": [fig["latency"]["load_s"][e][f] for f in factors],
            "p50": [out["p50_us"][e][f] for f in factors],
            "p99": [out["p99_us"][e][f] for f in factors],
        }
        out["exponents"][e] = {name: fit_exponent(tokens, ys) for name, ys in series.items()}
    index = fig["index"]
    timed = [f for f in factors if f in index]
    index_tokens = [fig["sizes"][f]["tokens"] for f in timed]
    out["exponents"]["fastrag index"] = {
        "wall": fit_exponent(index_tokens, [index[f]["wall_s"] for f in timed]),
        "CPU": fit_exponent(index_tokens, [index[f]["cpu_s"] for f in timed]),
        "size": fit_exponent(index_tokens, [index[f]["index_bytes"] for f in timed]),
        "peak RSS": fit_exponent(index_tokens, [index[f]["peak_mb"] for f in timed]),
    }
    out["exponents"]["vocabulary"] = fit_exponent(tokens, [fig["sizes"][f]["terms"] for f in factors])
    return out


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def _exp(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def report(fig: dict[str, Any], summary: dict[str, Any]) -> str:
    """The Markdown section."""
    factors = [str(f) for f in fig["factors"]]
    sizes, index, builds, lat = fig["sizes"], fig["index"], fig["builds"], fig["latency"]
    p50, p99, exps = summary["p50_us"], summary["p99_us"], summary["exponents"]
    lines = [
        SECTION,
        "",
        (
            "Written by `benches/scaling.py` (re-run replaces this section; raw figures in "
            "`data/bench/results/scaling.json`, plots `benches/scaling_*.png`)."
        ),
        "",
        header(),
        (
            f"- corpus: vLLM 0.10.1 replicated; copy k ≥ 1 renames {fig['fraction']:.0%} of the identifier-like "
            f"names (deterministically, in text and paths): {fig['generated']['renamed_names']} renamings over "
            f"{fig['copies']} copies; {fig['generated']['files']} files, {_mb(fig['generated']['bytes'])} MB written"
        ),
        (
            f"- queries: {lat['queries']} public questions, top {K}; latency: every single-query call of "
            f"{fig['rounds']} rounds, engines and sizes rotating; build: "
            f"best of {fig['repeats']['fastrag']} for fastrag, 1 for the peers, each engine × size in its own process"
        ),
        (
            f"- load from other processes: {fig['foreign_cores']:.2f} of {os.cpu_count()} cores on average during "
            f"the run (latency phase {lat['foreign_cores']:.2f}); load average before {fig['load_before']}, after "
            f"{fig['load_after']}; script wall time {fig['wall_s']:.0f} s ("
            + ", ".join(f"{name} {sec:.0f} s" for name, sec in fig["phases_s"].items())
            + ")"
        ),
        "",
        "Corpus sizes and the full pipeline (`python -m fastrag index`, one process per size, lexical):",
        "",
        (
            "| size | source MB | files | chunks | tokens | distinct terms | index wall s (CPU s) | peak RSS MB "
            "| index MB | bm25.bin MB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in factors:
        s = sizes[f]
        ix = index.get(f)
        full = (
            f"{ix['wall_s']:.1f} ({ix['cpu_s']:.1f}) | {ix['peak_mb']:.0f} | {_mb(ix['index_bytes'])} "
            f"| {_mb(ix['bm25_bytes'])}"
            if ix
            else "— | — | — | —"
        )
        lines.append(
            f"| {f}× | {_mb(s['source_bytes'])} | {s['files']} | {s['chunks']} | {s['tokens'] / 1e6:.2f} M "
            f"| {s['terms']} | {full} |"
        )
    lines += [
        "",
        (
            "Engines on the same chunks and tokens (build: in memory, from texts for fastrag — tokenizing included — "
            "from token lists for the peers; tantivy writes its index while building; load: from the saved index, "
            "page cache warm):"
        ),
        "",
        (
            "| engine | size | build s (CPU s) | save s | size MB | load ms | p50 µs | p99 µs | p50 vs fastrag "
            "| peak RSS Δ MB | peak RSS MB | top-10 overlap |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in ENGINES:
        for f in factors:
            b = builds[e][f]
            ratio = p50[e][f] / p50["fastrag"][f]
            lines.append(
                f"| {e} | {f}× | {b['build_s']:.2f} ({b['build_cpu_s']:.2f}) | {b['save_s']:.2f} "
                f"| {_mb(b['size_bytes'])} | {lat['load_s'][e][f] * 1000:.0f} | {p50[e][f]:.0f} | {p99[e][f]:.0f} "
                f"| {ratio:.1f}× "
                f"| {b['peak_delta_mb']:.0f} | {b['peak_mb']:.0f} | {lat['overlap'][e][f]:.2f} |"
            )
    lines += [
        "",
        (
            "Growth exponents (least-squares slope of log metric vs log tokens, sizes "
            f"{', '.join(f + '×' for f in factors)}; 1 = linear):"
        ),
        "",
        "| engine | build (wall) | build (CPU) | size on disk | peak RSS Δ | load | p50 | p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in ENGINES:
        x = exps[e]
        lines.append(
            f"| {e} | {_exp(x['build'])} | {_exp(x['build CPU'])} | {_exp(x['size'])} | {_exp(x['peak RSS Δ'])} "
            f"| {_exp(x['load'])} "
            f"| {_exp(x['p50'])} | {_exp(x['p99'])} |"
        )
    fi = exps["fastrag index"]
    lines.append(
        f"| `fastrag index` (whole pipeline) | {_exp(fi['wall'])} | {_exp(fi['CPU'])} | {_exp(fi['size'])} | "
        f"{_exp(fi['peak RSS'])} (absolute) | — | — | — |"
    )
    lines += ["", f"Vocabulary (distinct terms) grows as tokens^{_exp(exps['vocabulary'])}.", ""]
    lines += acceptance(fig, summary)
    return "\n".join(lines) + "\n"


def acceptance(fig: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """The E3 checks, each with the figures it is made of; build linearity by wall time and by CPU time (the
    work done, which other processes on the shared cores inflate far less than the wall time)."""
    factors = [str(f) for f in fig["factors"]]
    lo, hi = factors[0], factors[-1]
    n = int(hi) / int(lo)
    p50 = summary["p50_us"]["fastrag"]
    lat_ratio = p50[hi] / p50[lo]
    b_lo, b_hi = fig["builds"]["fastrag"][lo], fig["builds"]["fastrag"][hi]
    i_lo, i_hi = fig["index"][lo], fig["index"][hi]
    rss_index = i_hi["peak_mb"]
    rss_build = b_hi["peak_mb"]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    def linear(what: str, key: str, unit: str, a: dict[str, Any], b: dict[str, Any]) -> str:
        ratio = b[key] / (n * a[key])
        return (
            f"- {what}, {unit}: {b[key]:.2f} s at {hi}× vs {n:.0f} × {a[key]:.2f} s = **{ratio:.2f}** of linear "
            f"(0.8–1.2: {verdict(0.8 <= ratio <= 1.2)})"
        )

    load = (
        f"other processes' load during the fastrag builds: {b_lo['foreign_cores']:.2f} cores at {lo}×, "
        f"{b_hi['foreign_cores']:.2f} at {hi}×"
    )
    return [
        f"Acceptance (E3, {hi}× vs {lo}×; {load}):",
        "",
        (
            f"- fastrag p50 latency: {p50[hi]:.0f} µs at {hi}× vs {p50[lo]:.0f} µs at {lo}× = **{lat_ratio:.2f}×** "
            f"(≤ {n:.0f}×: {verdict(lat_ratio <= n)})"
        ),
        linear("fastrag BM25 build", "build_s", "wall", b_lo, b_hi),
        linear("fastrag BM25 build", "build_cpu_s", "CPU", b_lo, b_hi),
        linear("`fastrag index`, whole pipeline", "wall_s", "wall", i_lo, i_hi),
        linear("`fastrag index`, whole pipeline", "cpu_s", "CPU", i_lo, i_hi),
        (
            f"- peak RSS building {hi}×: `fastrag index` process {rss_index:.0f} MB, BM25 build process (inputs "
            f"loaded) {rss_build:.0f} MB (≤ {MAX_RSS_MB} MB: {verdict(max(rss_index, rss_build) <= MAX_RSS_MB)})"
        ),
    ]


# --------------------------------------------------------------------------- main


def corpus_dir(factor: int) -> Path:
    """Where the ``factor``× corpus is generated."""
    return WORK / f"corpus-x{factor}"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every step of the bench; the raw figures."""
    factors: list[int] = sorted(set(args.factors))
    top = factors[-1]
    meter = CpuMeter()
    started = time.perf_counter()
    load_before = loadavg()
    phases: dict[str, float] = {}
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    if WORK.exists():
        shutil.rmtree(WORK)
    say(f"generating {top} copies of {CORPUS.relative_to(ROOT)} into {WORK.relative_to(ROOT)} ...")
    generated = generate(corpus_dir(top), top, args.fraction)
    for f in factors[:-1]:
        target = corpus_dir(f)
        for k in range(f):
            link_tree(corpus_dir(top) / f"copy{k}", target / f"copy{k}")
    phase("generate")
    index: dict[str, Any] = {}
    for f in sorted(set(args.index_factors) & set(factors) | {factors[0], top}):
        say(f"  fastrag index {f}× ...")
        index[str(f)] = index_corpus(corpus_dir(f), WORK / f"index-x{f}")
        say(f"    {index[str(f)]['chunks']} chunks, {index[str(f)]['wall_s']:.1f} s")
    phase("fastrag index")
    say("texts and tokens of every copy ...")
    inputs = WORK / "inputs"
    counts = prepare_inputs(corpus_dir(top), WORK / f"index-x{top}", inputs)
    phase("texts and tokens")
    sizes: dict[str, Any] = {}
    for key, done in index.items():
        if sum(counts[: int(key)]) != done["chunks"]:
            raise SystemExit(f"{key}×: {sum(counts[: int(key)])} chunks from the copies, {done['chunks']} indexed")
    repeats = {"fastrag": args.fastrag_repeats, "bm25s": 1, "tantivy": 1}
    builds: dict[str, dict[str, Any]] = {e: {} for e in ENGINES}
    engines_dir = WORK / "engines"
    for i, f in enumerate(factors):
        order = ENGINES[i % len(ENGINES) :] + ENGINES[: i % len(ENGINES)]
        for e in order:
            say(f"  build {e} {f}× ...")
            out = engines_dir / f"{e}-x{f}"
            builds[e][str(f)] = run_probe(
                ["--probe-build", e, "--factor", str(f), "--inputs", str(inputs), "--out", str(out),
                 "--repeats", str(repeats[e])]
            )  # fmt: skip
            say(f"    {builds[e][str(f)]['build_s']:.2f} s, {builds[e][str(f)]['peak_delta_mb']:.0f} MB")
        bm25 = _core.Bm25Index.load(str(engines_dir / f"fastrag-x{f}" / "bm25.bin"))
        total = sum(bm25.doc_len(d) for d in range(bm25.num_docs))
        sizes[str(f)] = {
            "chunks": bm25.num_docs,
            "tokens": total,
            "terms": bm25.num_terms,
            "files": sum(generated["copy_files"][:f]),
            "source_bytes": sum(generated["copy_bytes"][:f]),
        }
    phase("builds")
    say("load and latency, all engines and sizes in one process ...")
    latency = run_probe(
        ["--probe-latency", "--inputs", str(inputs), "--engines-dir", str(engines_dir),
         "--rounds", str(args.rounds), "--factors", *map(str, factors)]
    )  # fmt: skip
    phase("load and latency")
    return {
        "factors": factors,
        "phases_s": phases,
        "copies": top,
        "fraction": args.fraction,
        "rounds": args.rounds,
        "repeats": repeats,
        "generated": generated,
        "index": index,
        "sizes": sizes,
        "builds": builds,
        "latency": latency,
        "foreign_cores": meter.foreign_cores(),
        "load_before": load_before,
        "load_after": loadavg(),
        "wall_s": time.perf_counter() - started,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def main() -> None:
    """Generate, measure, report; remove the generated data unless ``--keep``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factors", type=int, nargs="+", default=list(FACTORS), help="corpus sizes (copies)")
    parser.add_argument("--fraction", type=float, default=0.3, help="share of identifier-like names renamed")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds")
    parser.add_argument(
        "--index-factors",
        type=int,
        nargs="*",
        default=[],
        help="sizes also timed with the full `fastrag index` (the smallest and largest always are)",
    )
    parser.add_argument("--fastrag-repeats", type=int, default=2, help="fastrag builds per size (best kept)")
    parser.add_argument("--keep", action="store_true", help=f"keep {WORK.relative_to(ROOT)} afterwards")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--probe-build", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--probe-latency", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--factor", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--engines-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_build:
        print(json.dumps(probe_build(args.probe_build, args.factor, args.inputs, args.out, args.repeats)))
        return
    if args.probe_latency:
        print(json.dumps(probe_latency(args.inputs, args.engines_dir, sorted(set(args.factors)), args.rounds)))
        return
    if not CORPUS.is_dir():
        print(f"scaling.py: error: no corpus at {CORPUS.relative_to(ROOT)}: run `make data`", file=sys.stderr)
        sys.exit(1)
    if len(set(args.factors)) < 2 or min(args.factors) < 1 or not 0 <= args.fraction <= 1 or args.rounds < 1:
        parser.error("need at least two factors ≥ 1, a fraction in 0..1 and at least one round")
    try:
        fig = measure(args)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    summary = summarize(fig)
    fig["summary"] = summary
    publish("scaling", fig, SECTION, report(fig, summary), write=not args.no_write)


if __name__ == "__main__":
    main()
