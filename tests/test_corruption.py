"""Damage is never silent: every file of a live generation truncated, flipped and edited, then searched
and re-indexed; a read-only or full disk; what killed runs leave behind.

The sweep runs in-process over a small repository indexed with vectors (one embedder shared by every
case): each case copies the pristine index, damages one file, then (a) loads and searches it, (b) runs
``index`` over it and searches again. Every outcome must be a one-line :class:`UserError` or exactly the
pristine results; anything else (another exception: a traceback for a user; different results: a
silent wrong answer) is collected and reported together. A sample of the cases runs through the real
command line, which must print one ``fastrag: error:`` line and no traceback.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import SAMPLE_FILES, run_cli, write_repo
from fastrag.errors import UserError
from fastrag.indexing import builder, generations
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.embed import Embedder
from fastrag.indexing.generations import (
    CHUNKS_TABLE,
    CURRENT_FILE,
    DIGESTS_TABLE,
    GENERATION_MARKER,
    HEADINGS_TABLE,
    LOCK_FILE,
    MANIFEST_FILE,
    SYMBOLS_TABLE,
    current_generation,
    index_lock,
    load_index,
)
from fastrag.indexing.vectors import ARRAYS_FILE, CACHE_FILE, USEARCH_FILE, VectorIndex
from fastrag.retrieval.retriever import Retriever
from fastrag.retrieval.symbols import find_definitions, outline

QUERIES = ("load a LoRA adapter at runtime", "SamplingParams temperature", "install with pip")
REPO_FILES = {**SAMPLE_FILES, "docs/serving.md": "# Serving\n\n## Start\n\nRun `vllm serve MODEL` to start.\n"}
Damage = Callable[[Path], None]
#: The disk and publication tests need no vectors.
LEXICAL = IndexParams(embed="none")


# ----------------------------------------------------------------------------- the pristine index


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The packaged embedding model, loaded once for every case."""
    return Embedder.resolve(cache_dir=tmp_path_factory.mktemp("ov-cache"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> tuple[Path, Path, Any]:
    """``(repo, index_dir, snapshot)``: the sample repository indexed with vectors, and what it answers."""
    root = tmp_path_factory.mktemp("pristine")
    repo = write_repo(root / "repo", REPO_FILES)
    index_dir = root / "ix"
    build(repo, index_dir, embedder)
    return repo, index_dir, snapshot(index_dir)


def build(repo: Path, index_dir: Path, embedder: Embedder) -> None:
    build_index(repo, index_dir, IndexParams(embed="docs"), display_root="repo", progress=False, embedder=embedder)


def snapshot(index_dir: Path) -> Any:
    """Everything a search reads of the live index, and what lexical searches return."""
    index = load_index(index_dir)
    manifest = {k: v for k, v in index.manifest.items() if k not in ("created", "manifest_sha256")}
    vectors = index.vectors
    assert vectors is not None and isinstance(vectors, VectorIndex)
    retriever = Retriever(index)
    return {
        "manifest": manifest,
        "chunks": (index.chunks.paths, index.chunks.file, index.chunks.start, index.chunks.end),
        "headings": (index.headings.file, index.headings.start, index.headings.end),
        "bm25": [index.bm25.search(q, 5) for q in QUERIES],
        "definitions": [index.definitions.search(q, 5) for q in QUERIES],
        "heading_bm25": [index.headings.bm25.search(q, 5) for q in QUERIES],
        "vectors": (vectors.chunk_ids.tolist(), vectors.search(np.asarray(vectors._floats[:2]), 3)),
        "search": [[(h.file_path, h.start, h.end, round(h.score, 6)) for h in retriever.search(q, 5, "lexical")]
                   for q in QUERIES],
        # what `definitions` and `outline` answer from the symbols table
        "definitions_of": [d.as_json() for d in find_definitions(index.symbols, index.chunks.paths, "LLMEngine", ())],
        "outlines": [[n.as_json() for n in outline(index, path)] for path in index.chunks.paths],
    }  # fmt: skip


# ----------------------------------------------------------------------------- damage


def truncate(fraction: float) -> Damage:
    def damage(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])

    return damage


def flip(where: float) -> Damage:
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        at = min(len(data) - 1, int(len(data) * where))
        data[at] ^= 0x5A
        path.write_bytes(bytes(data))

    return damage


def edit_json(change: Callable[[Any], None]) -> Damage:
    def damage(path: Path) -> None:
        raw = json.loads(path.read_text())
        change(raw)
        path.write_text(json.dumps(raw))

    return damage


def shift_first_start(raw: Any) -> None:
    raw["start"][0] += 1


def swap_paths(raw: Any) -> None:
    raw["paths"][0], raw["paths"][1] = raw["paths"][1], raw["paths"][0]


def change_a_file_record(raw: Any) -> None:
    first = min(raw)
    record = raw[first]
    record[2] = "0" * len(str(record[2]))  # its content digest


def shift_first_line(raw: Any) -> None:
    raw["first"][raw["kind"].index("class")] -= 1  # a class's first line: the JSON stays valid, the answer wrong


def change_a_digest(raw: Any) -> None:
    raw[min(raw)] = "0" * 32  # a file's content hash


def change_display_root(raw: Any) -> None:
    raw["display_root"] = "elsewhere"


def swap_with(other: str) -> Damage:
    def damage(path: Path) -> None:
        twin = path.parent / other
        a, b = path.read_bytes(), twin.read_bytes()
        path.write_bytes(b)
        twin.write_bytes(a)

    return damage


def edit_npz(key: str) -> Damage:
    """Rewrite an ``.npz`` as a valid file with one number of array ``key`` changed."""

    def damage(path: Path) -> None:
        with np.load(path, allow_pickle=False) as arrays:
            content = {k: np.array(arrays[k]) for k in arrays.files}
        content[key].reshape(-1)[0] += 1 if content[key].dtype.kind in "iu" else 0.5
        buffer = io.BytesIO()
        np.savez(buffer, **content)  # type: ignore[arg-type]  # numpy's stub types the keywords as bool
        path.write_bytes(buffer.getvalue())

    return damage


def negated_usearch(path: Path) -> None:
    """A valid usearch file of other vectors."""
    loaded = VectorIndex.load(path.parent)
    other = VectorIndex.build(loaded.chunk_ids, -np.asarray(loaded._floats))
    work = path.parent / ".other"
    other.save(work)
    shutil.copyfile(work / USEARCH_FILE, path)
    shutil.rmtree(work)


def write(data: bytes) -> Damage:
    def damage(path: Path) -> None:
        path.write_bytes(data)

    return damage


def append(data: bytes) -> Damage:
    def damage(path: Path) -> None:
        path.write_bytes(path.read_bytes() + data)

    return damage


#: One semantic edit per file: the content stays well-formed, its meaning changes.
SEMANTIC: dict[str, list[tuple[str, Damage]]] = {
    CHUNKS_TABLE: [("offset", edit_json(shift_first_start)), ("paths swapped", edit_json(swap_paths))],
    HEADINGS_TABLE: [("offset", edit_json(shift_first_start))],
    "files.json": [("digest", edit_json(change_a_file_record))],
    MANIFEST_FILE: [("display_root", edit_json(change_display_root))],
    SYMBOLS_TABLE: [("one line number", edit_json(shift_first_line))],
    DIGESTS_TABLE: [("digest", edit_json(change_a_digest))],
    "bm25.bin": [("swapped with definitions.bin", swap_with("definitions.bin"))],
    "headings.bin": [("swapped with bm25.bin", swap_with("bm25.bin"))],
    "definitions.bin": [("swapped with headings.bin", swap_with("headings.bin"))],
    ARRAYS_FILE: [("one vector", edit_npz("floats")), ("one chunk id", edit_npz("chunk_ids"))],
    USEARCH_FILE: [("other vectors", negated_usearch)],
    CURRENT_FILE: [("no such generation", write(b"gen-0-1")), ("non-UTF-8 byte", append(b"\xff"))],
    CACHE_FILE: [("one vector", edit_npz("vectors"))],
}
#: Damage applied to every file.
GENERIC: list[tuple[str, Damage]] = [
    ("empty", truncate(0.0)),
    ("half", truncate(0.5)),
    ("first byte flipped", flip(0.0)),
    ("middle byte flipped", flip(0.5)),
    ("last byte flipped", flip(1.0)),
    ("a byte appended", append(b"\x00")),
]


def files_of(index_dir: Path) -> list[str]:
    """Every file a search or an index run reads: the live generation's, ``CURRENT``, the embedding cache."""
    gen = current_generation(index_dir)
    assert gen is not None
    return sorted(f"{gen.name}/{p.name}" for p in gen.iterdir()) + [CURRENT_FILE, CACHE_FILE]


def outcome(work: Callable[[], Any]) -> tuple[str, Any]:
    """``("error", message)`` for a user error, ``("ok", result)``, or ``("crash", exception)``."""
    try:
        return "ok", work()
    except UserError as exc:
        return "error", str(exc)
    except Exception as exc:  # noqa: BLE001 (any other exception is what the sweep looks for: a traceback)
        return "crash", f"{type(exc).__name__}: {exc}"


def check_case(ix: Path, repo: Path, embedder: Embedder, expected: Any, case: str) -> tuple[list[str], int, int]:
    """Search the damaged index ``ix``, index over it, search again: ``(problems, errors, same)``."""
    problems: list[str] = []
    errors = same = 0

    def reindexed() -> Any:
        build(repo, ix, embedder)
        return snapshot(ix)

    for step, work in (("search", lambda: snapshot(ix)), ("index", reindexed)):
        kind, value = outcome(work)
        if kind == "crash":
            problems.append(f"{case}, {step}: {value}")
        elif kind == "error":
            errors += 1
            if "\n" in value or not value:
                problems.append(f"{case}, {step}: a message of several lines: {value!r}")
        elif value != expected:
            problems.append(f"{case}, {step}: different results, no error")
        else:
            same += 1
    # an index run over any damage leaves an intact index that answers as the pristine one did
    kind, value = outcome(lambda: snapshot(ix))
    if kind != "ok" or value != expected:
        problems.append(f"{case}: still damaged after `index` ({kind}: {str(value)[:200]})")
    return problems, errors, same


def test_corruption_sweep(pristine: tuple[Path, Path, Any], embedder: Embedder, tmp_path: Path) -> None:
    repo, clean, expected = pristine
    names = files_of(clean)
    cases = [(name, label, damage) for name in names for label, damage in GENERIC]
    cases += [(name, label, damage) for name in names for label, damage in SEMANTIC.get(name.split("/")[-1], [])]
    assert {n.split("/")[-1] for n in names} >= set(SEMANTIC), names  # every table has its semantic edit
    problems: list[str] = []
    errors = same = 0
    for n, (name, label, damage) in enumerate(cases):
        ix = tmp_path / f"case{n}"
        shutil.copytree(clean, ix)
        damage(ix / name)
        found, case_errors, case_same = check_case(ix, repo, embedder, expected, f"{name} {label}")
        problems += found
        errors += case_errors
        same += case_same
        shutil.rmtree(ix)
    print(f"corruption sweep: {len(cases)} cases, {errors} one-line errors, {same} identical results, "
          f"{len(problems)} problems")  # fmt: skip
    assert not problems, f"{len(problems)} of {len(cases)} cases:\n" + "\n".join(problems)
    assert len(cases) >= 75 and errors > len(cases) // 2 and same > 0  # the sweep did reach the checks


@pytest.mark.parametrize(
    ("name", "damage", "command", "expected"),
    [
        (CHUNKS_TABLE, edit_json(shift_first_start), "search", "chunks.json fails its checksum"),
        (CHUNKS_TABLE, edit_json(swap_paths), "search", "chunks.json fails its checksum"),
        (CURRENT_FILE, append(b"\xff"), "search", "CURRENT names no generation"),
        (ARRAYS_FILE, write(b""), "search", "vectors.npz fails its checksum"),
        (CACHE_FILE, write(b""), "index", None),
    ],
)
def test_damage_through_the_command_line(
    pristine: tuple[Path, Path, Any], tmp_path: Path, name: str, damage: Damage, command: str, expected: str | None
) -> None:
    _, clean, _ = pristine
    write_repo(tmp_path / "repo", REPO_FILES)
    ix = tmp_path / "data/processed"
    shutil.copytree(clean, ix)
    gen = current_generation(clean)
    assert gen is not None
    damage(ix / (f"{gen.name}/{name}" if name not in (CURRENT_FILE, CACHE_FILE) else name))
    args = ["search", "How do I load a LoRA adapter?"]
    if command == "index":
        args = ["index", "--repo_path", "repo", "--vectors", "docs"]
    result = run_cli(*args, cwd=tmp_path)
    assert "Traceback" not in result.err
    if expected is None:  # a damaged cache is dropped and rebuilt: never fatal
        assert result.code == 0, result.err
        assert run_cli("search", "lora adapter", cwd=tmp_path).code == 0
        return
    assert result.code == 1 and result.out == ""
    assert result.err_lines == [line for line in result.err_lines if line.startswith("fastrag: error:")]
    assert len(result.err_lines) == 1 and expected in result.err_lines[0], result.err


# ----------------------------------------------------------------------------- read-only and full disks


@pytest.fixture()
def read_only(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path, int], None]:
    """Make writes below a folder fail as on a read-only (``EROFS``) or full (``ENOSPC``) disk.

    Tests run as root, where permission bits stop nothing, and a read-only mount needs privileges a
    test does not have: so the OS calls that create or write files are patched, for that folder only.
    """

    def install(folder: Path, error: int) -> None:
        base = str(folder.resolve())
        real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir

        def below(path: Any) -> bool:
            return isinstance(path, (str, os.PathLike)) and os.path.abspath(os.fspath(path)).startswith(base)

        def fail(path: Any) -> OSError:
            return OSError(error, os.strerror(error), os.fspath(path))

        def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if below(file) and any(c in mode for c in "wax+"):
                raise fail(file)
            return real_open(file, mode, *args, **kwargs)

        def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if below(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise fail(path)
            return real_os_open(path, flags, *args, **kwargs)

        def fake_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            if below(path) and not os.path.isdir(path):
                raise fail(path)
            real_mkdir(path, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", fake_open)
        monkeypatch.setattr(os, "open", fake_os_open)
        monkeypatch.setattr(os, "mkdir", fake_mkdir)

    return install


@pytest.mark.parametrize("error", [30, 28], ids=["read-only", "full"])  # EROFS, ENOSPC
def test_index_into_an_unwritable_folder_fails_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: Callable[[Path, int], None], error: int
) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in ix.iterdir()}
    (repo / "pkg/extra.py").write_text("VALUE = 1\n")
    chunked: list[object] = []
    monkeypatch.setattr(builder, "_chunk_one", lambda job: chunked.append(job))
    read_only(ix, error)
    with pytest.raises(UserError) as raised:
        build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    assert str(raised.value).startswith(f"cannot write to index directory {ix}: {os.strerror(error)}")
    assert "\n" not in str(raised.value) and chunked == []  # refused before a single file was read
    monkeypatch.undo()
    assert {p.name: p.stat().st_mtime_ns for p in ix.iterdir()} == before


def test_a_full_disk_during_publication_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    live = current_generation(ix)
    (repo / "pkg/extra.py").write_text("VALUE = 1\n")
    real_fsync = os.fsync

    def full(fd: int) -> None:  # the probe passes (it runs first); the generation's files do not
        if any(p.name.startswith(".gen-") for p in ix.iterdir()):
            raise OSError(28, os.strerror(28))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(UserError, match="No space left on device"):
        build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    monkeypatch.undo()
    assert current_generation(ix) == live and not [p for p in ix.iterdir() if p.name.endswith(".tmp")]


# ----------------------------------------------------------------------------- what killed runs leave


def test_a_crash_between_rename_and_current_keeps_the_live_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    (repo / "pkg/one.py").write_text("ONE = 1\n")
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    live = current_generation(ix)
    assert live is not None

    def killed(point: str) -> None:
        if point == "renamed":  # renamed into place, CURRENT never written: what SIGKILL leaves
            raise KeyboardInterrupt

    (repo / "pkg/two.py").write_text("TWO = 2\n")
    monkeypatch.setattr(generations, "pause_point", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    monkeypatch.undo()
    orphan = [p.name for p in ix.glob("gen-*") if p.name > live.name]
    assert current_generation(ix) == live and len(orphan) == 1
    (repo / "pkg/three.py").write_text("THREE = 3\n")
    report = build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    assert report.path is not None
    # the new generation and the one CURRENT named before it; the orphan is gone
    assert sorted(p.name for p in ix.glob("gen-*")) == sorted([live.name, report.path.name])


def test_leftovers_of_killed_runs_are_cleaned_by_the_next_run(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    live = current_generation(ix)
    assert live is not None
    staging = ix / ".gen-1-2.tmp"
    (staging / "inner").mkdir(parents=True)
    (staging / "inner/bm25.bin").write_bytes(bytes(1000))
    orphan = ix / "gen-ffffffffffffffff-3"  # renamed by a killed run, never published
    orphan.mkdir()
    for generation in (staging, orphan):  # a staging folder gets its mark before anything else
        (generation / GENERATION_MARKER).write_bytes(b"x")
    temporary = ix / ".embeddings.npz.abcd_123.tmp"  # as write_bytes_atomic names its temporary files
    temporary.write_bytes(b"x")
    # what fastrag did not write stays, whatever its name: nothing proves it is a leftover
    foreign = [ix / "gen-1-2/thesis.txt", ix / ".draft.tmp", ix / ".gen-7-7.tmp/notes.txt"]
    for path in foreign:
        path.parent.mkdir(exist_ok=True)
        path.write_text("mine")
    assert build_index(repo, ix, LEXICAL, display_root="repo", progress=False).up_to_date  # nothing to publish
    assert not staging.exists() and not orphan.exists() and not temporary.exists()
    assert all(path.read_text() == "mine" for path in foreign)
    assert current_generation(ix) == live


def test_while_another_indexer_holds_the_lock_only_old_leftovers_go(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
    fresh, old = ix / ".gen-5-5.tmp", ix / ".gen-4-4.tmp"
    for staging in (fresh, old):
        staging.mkdir()
        (staging / GENERATION_MARKER).write_bytes(b"x")
    week = time.time() - 7 * 24 * 3600
    os.utime(old, (week, week))
    import fcntl

    with open(ix / LOCK_FILE, "a+b") as other:  # another process's lock (flock: per open file)
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        with index_lock(ix, wait=False) as held:
            assert not held
        generations.clean_leftovers(ix)
        fcntl.flock(other.fileno(), fcntl.LOCK_UN)
    assert fresh.exists() and not old.exists()
