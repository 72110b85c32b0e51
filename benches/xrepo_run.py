"""The xrepo benchmark's runs: the trees unpacked, fastrag's indexes built, both engines' queries scored.

The library behind ``benches/xrepo.py`` (and whatever else measures a ranker on the benchmark, e.g. a
cross-validation by repository)::

    repos = load_repos(XREPO)                       # xrepo_score: the repositories, their tasks
    trees = unpack_trees(repos, XREPO)              # NAME -> the unpacked tree (benches/_work/xrepo/trees/NAME)
    builds = build_indexes(repos, trees)            # `python -m fastrag index` per benchmark root, timed
    results = run_fastrag(repos, INDEX_ROOT)        # list[TaskResult]; search=... swaps the ranker
    semble = run_semble(repos, trees)               # semble 0.7.0, BM25 mode, a local dummy model

Everything generated lives in ``benches/_work/xrepo/`` (ignored by git): a tree is unpacked again only
when its tarball changed, an index is rebuilt unless ``reuse`` is asked and neither its tree nor fastrag's
build (its Python sources and the native core) changed since it was built.

fastrag is run exactly as a user runs it: ``index`` with the shipped defaults as a subprocess (process
start included in its time), then, in-process, :meth:`Retriever.search_many` with k = 10 in the default
mode, as ``search_dataset`` calls it. Each hit's character span becomes 1-based inclusive lines of the
file as fastrag decoded it. semble runs in-process (its index time has no process start): ``SembleIndex
.from_path(root, model_path=DIR)`` and ``search(query, top_k=10, alpha=0.0)``, its BM25 retrieval with its
whole ranking stack; the model is a local model2vec ``StaticModel`` of random 8-dimensional vectors over
the packaged MiniLM ``tokenizer.json`` (no hub), which BM25 mode never consults for ranking.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import ROOT
from report import run_measured, say
from xrepo_score import K, Repo, Span, Task, TaskResult, char_span_lines, load_tasks, score

from fastrag import _core
from fastrag.config import DEFAULT_MODE, DEFAULT_MODELS_DIR
from fastrag.indexing.corpus import read_as_written
from fastrag.indexing.embed import TOKENIZER_PACKAGE
from fastrag.indexing.sources import Sources
from fastrag.retrieval.retriever import Hit, Retriever

if TYPE_CHECKING:
    from semble import SembleIndex

#: The benchmark (``../shared/xrepo`` beside the checkout).
XREPO = ROOT.parent / "shared" / "xrepo"
#: The build folder: trees, indexes, the dummy model (``benches/_work/`` is ignored by git).
WORK = ROOT / "benches" / "_work" / "xrepo"
TREES = WORK / "trees"
INDEX_ROOT = WORK / "index"
SEMBLE_MODEL = WORK / "semble-model"
#: An empty cache folder for semble, so that no index cached by another semble run is loaded instead of built.
SEMBLE_CACHE = WORK / "semble-cache"
#: Dimensions and seed of the dummy model's random vectors.
DUMMY_DIMS = 8
DUMMY_SEED = 0
#: What fastrag's build is made of: an index built by another build is not reused.
FASTRAG_SOURCES = ROOT / "python" / "fastrag"

#: A ranker under test: ``(retriever, queries, k)`` to each query's ranked hits.
Search = Callable[[Retriever, Sequence[str], int], list[list[Hit]]]


def shipped_search(retriever: Retriever, queries: Sequence[str], k: int) -> list[list[Hit]]:
    """fastrag's shipped search path, as ``search_dataset`` calls it: default mode and precision, no filter."""
    return retriever.search_many(list(queries), k, DEFAULT_MODE)


# --------------------------------------------------------------------------- fingerprints


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: Parts of the package that never touch an index's build: a change there keeps the indexes.
SEARCH_ONLY = frozenset({"retrieval", "answering", "server", "static", "evaluation"})


def build_fingerprint(sources: Path = FASTRAG_SOURCES) -> str:
    """sha256 over the package files that build an index (Python sources, data files, the native core;
    caches and the search-only parts of :data:`SEARCH_ONLY` left out)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in sources.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(sources)
        if rel.parts[0] in SEARCH_ONLY:
            continue
        digest.update(rel.as_posix().encode() + b"\0" + file_digest(path).encode() + b"\0")
    return digest.hexdigest()


def _read_stamp(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_stamp(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(data), indent=1, sort_keys=True))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- trees


def unpack_trees(repos: Sequence[Repo], xrepo_dir: Path = XREPO, trees: Path = TREES) -> dict[str, Path]:
    """Each repository's tree unpacked into ``trees/NAME`` (its tarball unpacks to ``NAME/...``); a tree
    already unpacked from the same tarball (sha256 in ``trees/NAME.json``) is kept. Returns NAME -> tree."""
    out: dict[str, Path] = {}
    for repo in repos:
        tarball = xrepo_dir / "trees" / f"{repo.name}.tar.gz"
        digest = file_digest(tarball)
        tree, stamp = trees / repo.name, trees / f"{repo.name}.json"
        if not (tree.is_dir() and _read_stamp(stamp).get("tarball") == digest):
            _unpack(tarball, repo.name, trees)
            _write_stamp(stamp, {"tarball": digest})
        out[repo.name] = tree
    return out


def _unpack(tarball: Path, name: str, trees: Path) -> None:
    """Unpack ``tarball`` into a temporary folder, then move its ``name/`` into ``trees/name`` (never half a tree)."""
    trees.mkdir(parents=True, exist_ok=True)
    staging = trees / f".{name}.unpacking"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with tarfile.open(tarball) as archive:
            outside = [m.name for m in archive.getmembers() if m.name.split("/", 1)[0] != name]
            if outside:
                raise SystemExit(f"xrepo: {tarball} holds {outside[0]!r}, outside {name}/")
            if hasattr(tarfile, "data_filter"):
                archive.extractall(staging, filter="data")
            else:  # Python < 3.10.12: members were checked to stay under name/ above
                archive.extractall(staging)
        shutil.rmtree(trees / name, ignore_errors=True)
        os.replace(staging / name, trees / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def benchmark_dir(repo: Repo, tree: Path) -> Path:
    """The folder of ``tree`` that is indexed (the repository's ``benchmark_root``, else all of it)."""
    return tree / repo.root if repo.root else tree


def repo_path(repo: Repo, path_in_root: str) -> str:
    """A path relative to the benchmark root as a path in the repository (how results are scored)."""
    return f"{repo.root}/{path_in_root}" if repo.root else path_in_root


# --------------------------------------------------------------------------- fastrag: indexes


@dataclass(frozen=True, slots=True)
class IndexBuild:
    """One repository's fastrag index: its folder, the build's wall time (``None``: reused) and, when
    ``index`` failed, its last line of error."""

    index_dir: Path
    seconds: float | None
    error: str | None = None


def short_error(error: str) -> str:
    """The gist of ``index``'s error line, for a progress line or a table cell: its message up to the path it names."""
    message = error.removeprefix("fastrag: error: ")
    return message.split(" under ", 1)[0].split(" (", 1)[0]


def build_indexes(
    repos: Sequence[Repo],
    trees: Mapping[str, Path],
    index_root: Path = INDEX_ROOT,
    reuse: bool = False,
    progress: bool = True,
) -> dict[str, IndexBuild]:
    """Index each repository's benchmark root with ``python -m fastrag index`` and the shipped defaults
    into ``index_root/NAME``, from scratch, timed (process start included).

    With ``reuse``, an index whose tree and fastrag build (:func:`build_fingerprint`) are those it was
    built from is kept as it is (``seconds`` ``None``). A failed ``index`` is reported, not raised: its
    repository then scores 0.
    """
    fingerprint = build_fingerprint()
    builds: dict[str, IndexBuild] = {}
    for repo in repos:
        index_dir, stamp_path = index_root / repo.name, index_root / f"{repo.name}.json"
        tree_stamp = _read_stamp(trees[repo.name].with_name(f"{repo.name}.json")).get("tarball")
        wanted = {"tarball": tree_stamp, "build": fingerprint}
        stamp = _read_stamp(stamp_path)
        if reuse and index_dir.is_dir() and {k: stamp.get(k) for k in wanted} == wanted:
            builds[repo.name] = IndexBuild(index_dir, None, stamp.get("error"))
            continue
        stamp_path.unlink(missing_ok=True)
        shutil.rmtree(index_dir, ignore_errors=True)
        cmd = [sys.executable, "-m", "fastrag", "index", "--repo_path", str(benchmark_dir(repo, trees[repo.name]))]
        done = run_measured([*cmd, "--index_dir", str(index_dir)])
        error = None
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            error = lines[-1] if lines else f"exit status {done.returncode}"
        builds[repo.name] = IndexBuild(index_dir, done.wall_s, error)
        _write_stamp(stamp_path, {**wanted, "error": error, "seconds": done.wall_s})
        if progress:
            say(f"  fastrag index {repo.name}: {done.wall_s:.2f} s" + (f" — {short_error(error)}" if error else ""))
    return builds


def time_in_process(
    repos: Sequence[Repo], trees: Mapping[str, Path], embed: str, progress: bool = True
) -> dict[str, float]:
    """Seconds of an in-process :func:`~fastrag.indexing.builder.build_index` of each repository's benchmark
    root into an empty temporary folder (thrown away), the shipped defaults but ``embed``: timed as semble's
    ``from_path`` is, in this process, imports already paid (an untimed build of the first repository first)."""
    from fastrag.indexing.builder import build_index
    from fastrag.indexing.records import IndexParams

    params = IndexParams(embed=embed)
    seconds: dict[str, float] = {}
    for i, repo in enumerate([*repos[:1], *repos]):
        with tempfile.TemporaryDirectory(prefix="fastrag-xrepo-") as tmp:
            started = time.perf_counter()
            build_index(benchmark_dir(repo, trees[repo.name]), Path(tmp) / "index", params, progress=False)
            if i:
                seconds[repo.name] = time.perf_counter() - started
    if progress:
        say(f"  fastrag in-process, vectors {embed}: {sum(seconds.values()):.2f} s in all")
    return seconds


# --------------------------------------------------------------------------- fastrag: queries


class LineTable:
    """Line starts of the files results name, read once each (as fastrag decoded them)."""

    def __init__(self) -> None:
        self._starts: dict[Path, list[int]] = {}

    def lines(self, path: Path, start: int, end: int) -> tuple[int, int]:
        """The 1-based first and last line of the characters ``[start, end)`` of ``path``."""
        starts = self._starts.get(path)
        if starts is None:
            starts = self._starts[path] = _core.line_starts(read_as_written(str(path)))
        return char_span_lines(starts, start, end)


def _timed(run: Callable[[str], object], queries: Sequence[str], latencies: list[float]) -> None:
    """Run every query alone, appending each one's wall time to ``latencies``."""
    for query in queries:
        started = time.perf_counter()
        run(query)
        latencies.append(time.perf_counter() - started)


def _by_repo(tasks: Sequence[Task]) -> dict[str, list[Task]]:
    grouped: dict[str, list[Task]] = {}
    for task in tasks:
        grouped.setdefault(task.repo, []).append(task)
    return grouped


def run_fastrag(
    repos: Sequence[Repo],
    index_root: Path = INDEX_ROOT,
    search: Search = shipped_search,
    tasks: Sequence[Task] | None = None,
    trees: Path = TREES,
    xrepo_dir: Path = XREPO,
    latencies: list[float] | None = None,
    question_latencies: list[float] | None = None,
) -> list[TaskResult]:
    """Every task of ``repos`` (default: all their annotated tasks) searched with ``search`` on the index
    ``index_root/NAME`` and scored. A repository without an index scores 0 on each of its tasks.

    ``latencies``: when given, each query is then run again alone (after the batch, so warm) and its
    wall time appended. ``question_latencies``: the same for each query asked as a full question
    (:func:`question_form`), which the default mode answers with the vectors too (hybrid), on the
    repositories whose index has vectors (those with documentation).
    """
    grouped = _by_repo(load_tasks(xrepo_dir, repos) if tasks is None else tasks)
    results: list[TaskResult] = []
    for repo in repos:
        todo = grouped.get(repo.name, [])
        if not (index_root / repo.name / "CURRENT").is_file():
            results += [score(t, []) for t in todo]
        elif todo:
            results += _fastrag_repo(
                index_root / repo.name, (trees / repo.name).resolve(), todo, search, latencies, question_latencies
            )
    return results


def question_form(query: str) -> str:
    """``query`` put as a direct question (:func:`fastrag.retrieval.evidence.asks_directly`)."""
    return f"What is {query.rstrip('?')}?"


def _fastrag_repo(
    index_dir: Path,
    tree: Path,
    tasks: Sequence[Task],
    search: Search,
    latencies: list[float] | None,
    question_latencies: list[float] | None = None,
) -> list[TaskResult]:
    """The tasks of one repository searched on its index and scored (see :func:`run_fastrag`)."""
    retriever = Retriever.open(index_dir, models_dir=ROOT / DEFAULT_MODELS_DIR)
    locate = Sources.of(retriever.index.manifest).locate
    table = LineTable()
    queries = [t.query for t in tasks]
    results: list[TaskResult] = []
    for task, hits in zip(tasks, search(retriever, queries, K)):
        spans = []
        for hit in hits:
            path = locate(hit.file_path).resolve()
            spans.append(Span(path.relative_to(tree).as_posix(), *table.lines(path, hit.start, hit.end)))
        results.append(score(task, spans))
    if latencies is not None:
        _timed(lambda q: search(retriever, [q], K), queries, latencies)
    if question_latencies is not None and retriever.index.has_vectors:
        asked = [question_form(q) for q in queries]
        search(retriever, asked[:1], K)  # the first full question loads the embedder: not a query's cost
        _timed(lambda q: search(retriever, [q], K), asked, question_latencies)
    return results


# --------------------------------------------------------------------------- semble


def dummy_model(folder: Path = SEMBLE_MODEL) -> Path:
    """A model2vec ``StaticModel`` saved in ``folder``: random vectors (fixed seed) over the packaged MiniLM
    tokenizer. Made once; semble's BM25 mode needs a model to load, not a good one."""
    if (folder / "config.json").is_file():
        return folder
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tokenizer_file = importlib.resources.files(TOKENIZER_PACKAGE) / "model" / "tokenizer.json"
    tokenizer = Tokenizer.from_str(tokenizer_file.read_text(encoding="utf-8"))
    vectors = np.random.default_rng(DUMMY_SEED).standard_normal((tokenizer.get_vocab_size(), DUMMY_DIMS))
    staging = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    StaticModel(vectors.astype(np.float32), tokenizer, normalize=True).save_pretrained(staging)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)
    return folder


@contextmanager
def _offline_semble(cache: Path) -> Iterator[None]:
    """semble with an empty cache folder of its own and the hub switched off, for the duration."""
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    saved = {k: os.environ.get(k) for k in ("SEMBLE_CACHE_LOCATION", "HF_HUB_OFFLINE")}
    os.environ.update({"SEMBLE_CACHE_LOCATION": str(cache.resolve()), "HF_HUB_OFFLINE": "1"})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_semble(
    repos: Sequence[Repo],
    trees: Mapping[str, Path],
    tasks: Sequence[Task] | None = None,
    xrepo_dir: Path = XREPO,
    index_seconds: dict[str, float] | None = None,
    latencies: list[float] | None = None,
    progress: bool = True,
) -> list[TaskResult]:
    """Every task of ``repos`` searched with semble in BM25 mode (``alpha=0``, its ranking stack on) and
    scored. ``index_seconds``: filled with each repository's in-process index time; ``latencies``: as in
    :func:`run_fastrag`."""
    from semble import SembleIndex

    model = str(dummy_model())
    grouped = _by_repo(load_tasks(xrepo_dir, repos) if tasks is None else tasks)
    results: list[TaskResult] = []
    with _offline_semble(SEMBLE_CACHE):
        for repo in repos:
            todo = grouped.get(repo.name, [])
            if not todo:
                continue
            started = time.perf_counter()
            index = SembleIndex.from_path(benchmark_dir(repo, trees[repo.name]), model_path=model)
            seconds = time.perf_counter() - started
            if index_seconds is not None:
                index_seconds[repo.name] = seconds
            if progress:
                say(f"  semble index {repo.name}: {seconds:.2f} s")
            results += _semble_repo(repo, index, todo, latencies)
    return results


def _semble_repo(
    repo: Repo, index: SembleIndex, tasks: Sequence[Task], latencies: list[float] | None
) -> list[TaskResult]:
    """The tasks of one repository searched with semble's ``index`` and scored (see :func:`run_semble`)."""

    def search(query: str) -> list[Span]:
        found = index.search(query, top_k=K, alpha=0.0)
        return [Span(repo_path(repo, r.chunk.file_path), r.chunk.start_line, r.chunk.end_line) for r in found]

    results = [score(task, search(task.query)) for task in tasks]
    if latencies is not None:
        _timed(search, [t.query for t in tasks], latencies)
    return results
