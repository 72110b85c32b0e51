"""Helpers every bench script shares: paths, the machine line, section replacement in RESULTS.md,
a meter of foreign CPU load, percentiles, and fastrag's indexed corpus as token lists."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag import _core
from fastrag.indexing.builder import FileRecord, IndexParams
from fastrag.indexing.generations import ChunkTable, load_index
from fastrag.indexing.texts import indexed_texts

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data/raw/vllm-0.10.1"
DISPLAY_ROOT = "data/raw/vllm-0.10.1"
SETS = {s: ROOT / f"data/datasets/AnsweredQuestions/dataset_{s}_public.json" for s in ("docs", "code")}
RESULTS = ROOT / "benches/RESULTS.md"

#: Tokenizer settings of ``Bm25Index`` that ``tokenize_batch`` and ``Bm25Index.build`` take (those it has).
TOKENIZER_SETTINGS = ("stopwords", "min_len", "parts", "stem")


@dataclass(slots=True)
class Corpus:
    """The documents every engine indexes: fastrag's indexed texts and their token lists."""

    texts: list[str]
    tokens: list[list[str]]
    k1: float
    b: float
    tokenizer: dict[str, Any]


def lexical_params() -> IndexParams:
    """The default parameters, without vectors where the index has them (chunks and BM25 do not change)."""
    params = IndexParams()
    if "embed" in {f.name for f in dataclasses.fields(params)}:
        params = dataclasses.replace(params, embed="none")
    return params


def read_corpus(index_dir: Path, with_tokens: bool = True) -> tuple[Corpus, ChunkTable, _core.Bm25Index, float]:
    """Rebuild fastrag's indexed texts from the index's file cache and tokenize them (interned strings).

    Returns the corpus, the chunk table, the index and the tokenizing time in seconds. Checks that every
    token list is as long as fastrag's own document length, so the peers index exactly fastrag's tokens.
    """
    index = load_index(index_dir)
    raw = json.loads((index.path / "files.json").read_text())
    records = [FileRecord.from_json(rel, raw[rel]) for rel in sorted(raw)]
    texts = indexed_texts(CORPUS, records)[0]
    bm25 = index.bm25
    tok_cfg = {key: getattr(bm25, key) for key in TOKENIZER_SETTINGS if hasattr(bm25, key)}
    if len(texts) != bm25.num_docs:
        raise SystemExit(f"{len(texts)} texts for {bm25.num_docs} indexed chunks: the corpus changed under the index")
    tokens: list[list[str]] = []
    seconds = 0.0
    if with_tokens:
        started = time.perf_counter()
        tokens = _core.tokenize_batch(texts, **tok_cfg)
        seconds = time.perf_counter() - started
        bad = [i for i, t in enumerate(tokens) if len(t) != bm25.doc_len(i)]
        if bad:
            raise SystemExit(f"{len(bad)} token lists differ from fastrag's document lengths (first: chunk {bad[0]})")
        memo: dict[str, str] = {}  # one str object per distinct token: the lists cost 8 bytes a token
        tokens = [[memo.setdefault(t, t) for t in doc] for doc in tokens]
    return Corpus(texts, tokens, bm25.k1, bm25.b, tok_cfg), index.chunks, bm25, seconds


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


class CpuMeter:
    """CPU time the rest of the machine used while this process ran: load that skews timings."""

    def __init__(self) -> None:
        self.start = (self._busy(), self._own(), time.perf_counter())

    @staticmethod
    def _busy() -> float:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy
        return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def own_cpu(self) -> float:
        """CPU seconds this process and the children it waited for used since the meter started."""
        return self._own() - self.start[1]

    def foreign_cores(self) -> float:
        """Mean number of cores busy with other processes since the meter started."""
        busy, own, wall = self._busy(), self._own(), time.perf_counter()
        return max(0.0, (busy - self.start[0]) - (own - self.start[1])) / max(wall - self.start[2], 1e-9)


def machine() -> str:
    """CPU model, cores, memory, date and versions, one Markdown line each."""
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
        platform.processor() or "unknown",
    )
    try:  # psutil is in the `bench` group only; `make bench` may run without it
        import psutil

        mem_gib = psutil.virtual_memory().total / 2**30
        cores = f"{psutil.cpu_count(logical=False)} physical / {psutil.cpu_count()} logical cores"
    except ImportError:
        mem_kb = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in ln)
        mem_gib, cores = mem_kb / 2**20, f"{os.cpu_count()} cores"
    versions = []
    for pkg in ("bm25s", "rank-bm25", "tantivy", "numpy", "fastrag"):
        try:
            versions.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{pkg} (not installed)")
    return "\n".join(
        [
            f"- machine: {cpu}, {cores}, {mem_gib:.1f} GiB RAM; {platform.platform()}",
            f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
            f"- versions: Python {platform.python_version()}, {', '.join(versions)}; fastrag._core {_core.__version__}",
        ]
    )


def shown(path: Path) -> str:
    """``path`` relative to the project root when it is inside it (as reports name files)."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling renamed over it; the file keeps its
    permissions (0644 when new), unlike a bare ``mkstemp`` file."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_section(path: Path, heading: str, body: str) -> None:
    """Replace the ``heading`` section of the Markdown file ``path`` (up to the next ``## ``) by ``body``.

    Appends the section when absent and creates the file when missing; other sections are kept. Written
    to a temporary file and renamed, so a crash leaves the old file whole. The one implementation every
    bench script uses.
    """
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + body
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + body + ("\n" + tail if tail else "")
    write_text_atomic(path, new)
