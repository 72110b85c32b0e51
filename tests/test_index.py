"""Index building: incremental equals full rebuild, publication is atomic, failures keep the old index."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_FILES, write_repo
from fastrag import _core
from fastrag.config import TABLE_WINDOW_SIZE
from fastrag.errors import UserError
from fastrag.indexing import builder as index_module
from fastrag.indexing.builder import IndexParams, build_index, primary_chunks
from fastrag.indexing.generations import (
    CHUNKS_TABLE,
    DEFINITIONS_BM25,
    FILES_TABLE,
    HEADINGS_TABLE,
    SYMBOLS_TABLE,
    current_generation,
    load_index,
)
from fastrag.indexing.lexical import BM25_FILES, texts_fingerprint
from fastrag.indexing.records import FileRecord, files_table
from fastrag.retrieval.retriever import Retriever

QUERIES = ["LoRA adapter endpoint", "temperature top_p", "scheduler request queue", "install pip GPU", "café"]


def snapshot(index_dir: Path) -> list[list[tuple[str, int, int, float]]]:
    retriever = Retriever.open(index_dir)
    ranked = retriever.search_many(QUERIES, 10)
    return [[(h.file_path, h.start, h.end, round(h.score, 4)) for h in hits] for hits in ranked]


def chunk_table(index_dir: Path) -> tuple[list[str], list[int], list[int], list[int]]:
    t = load_index(index_dir).chunks
    return t.paths, t.file, t.start, t.end


def test_incremental_update_equals_full_rebuild(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    inc, full = tmp_path / "inc", tmp_path / "full"
    first = build_index(repo, inc, display_root="repo", progress=False)
    assert first.chunked == first.files and not first.up_to_date

    (repo / "pkg/engine.py").write_text("class LLMEngine:\n    def step(self) -> None:\n        pass\n")
    (repo / "docs/install.md").unlink()
    (repo / "docs/new.md").write_text("# Speculative decoding\n\nDraft models propose tokens.\n")
    second = build_index(repo, inc, display_root="repo", progress=False)
    assert (second.chunked, second.removed) == (2, 1)
    assert second.reused == second.files - 2

    build_index(repo, full, display_root="repo", progress=False)
    assert chunk_table(inc) == chunk_table(full)
    assert snapshot(inc) == snapshot(full)


def test_unchanged_repository_is_up_to_date(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    before = sorted(p.name for p in (tmp_path / "ix").iterdir())
    again = build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    assert again.up_to_date and again.chunked == 0
    assert sorted(p.name for p in (tmp_path / "ix").iterdir()) == before


def test_touched_but_identical_file_is_not_rechunked(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    path = repo / "pkg/sampling.py"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    again = build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    assert again.chunked == 0 and not again.up_to_date


def test_changed_parameters_rebuild_everything(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    small = IndexParams(max_chunk_size=100, target_size=100)
    report = build_index(repo, tmp_path / "ix", small, display_root="repo", progress=False)
    assert report.chunked == report.files
    table = load_index(tmp_path / "ix").chunks
    assert all(0 < e - s <= 100 for s, e in zip(table.start, table.end))


def test_chunk_spans_are_real_offsets(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    table = load_index(tmp_path / "ix").chunks
    for cid in range(len(table)):
        path, start, end = table.span(cid)
        text = (tmp_path / path).read_bytes().decode("utf-8")
        assert 0 <= start < end <= len(text) and text[start:end].strip()


def test_crash_while_publishing_keeps_previous_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, display_root="repo", progress=False)
    before = snapshot(ix)
    (repo / "pkg/extra.py").write_text("def extra_function():\n    return 42\n")

    def explode(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(index_module, "write_json_atomic", explode)
    with pytest.raises(UserError, match="cannot write the index in .*: disk full"):
        build_index(repo, ix, display_root="repo", progress=False)
    monkeypatch.undo()
    assert snapshot(ix) == before
    assert not [p for p in ix.iterdir() if p.name.endswith(".tmp")]


def test_old_generations_are_pruned_but_previous_kept(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    for i in range(4):
        (repo / f"pkg/gen{i}.py").write_text(f"VALUE_{i} = {i}\n")
        build_index(repo, ix, display_root="repo", progress=False)
    gens = sorted(p.name for p in ix.glob("gen-*"))
    assert len(gens) == 2
    assert (ix / "CURRENT").read_text() == gens[-1]


def test_load_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no index"):
        load_index(tmp_path / "nothing")
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, display_root="repo", progress=False)
    gen = ix / (ix / "CURRENT").read_text()
    definitions = (gen / DEFINITIONS_BM25).read_bytes()
    (gen / DEFINITIONS_BM25).unlink()
    with pytest.raises(UserError, match="damaged .*definitions.bin: No such file"):
        load_index(ix)
    (gen / DEFINITIONS_BM25).write_bytes(definitions[: len(definitions) // 2])
    with pytest.raises(UserError, match="damaged|unreadable"):
        load_index(ix)
    (gen / DEFINITIONS_BM25).write_bytes(definitions)
    assert load_index(ix).definitions.num_docs == len(load_index(ix).chunks)
    (gen / "bm25.bin").write_bytes(b"")
    with pytest.raises(UserError, match="damaged|unreadable"):
        load_index(ix)
    shutil.rmtree(gen)  # CURRENT names a generation that is gone: damage, not "no index"
    with pytest.raises(UserError, match="damaged .CURRENT names no generation"):
        load_index(ix)


def test_binary_and_non_utf8_files_are_skipped(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    (repo / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    (repo / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    report = build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    assert sorted(s.rel_path for s in report.skipped) == ["blob.txt", "latin1.md"]
    assert report.files == 4


MODELS_DOC = (
    "# Supported models\n\nvLLM runs these architectures.\n\n## Text generation\n\n"
    "| Architecture | Models | LoRA |\n|---|---|---|\n"
    + "".join(f"| `Family{i}ForCausalLM` | Family {i} base and chat | yes |\n" for i in range(80))
    + "\n## Pooling\n\nSee the pooling page.\n"
)


def test_markdown_layers_are_indexed_but_not_primary(tmp_path: Path) -> None:
    """Sections and table windows are extra chunks: searchable, never among the primary chunks."""
    repo = write_repo(tmp_path / "repo", {"docs/models.md": MODELS_DOC, "pkg/a.py": "x = 1\n"})
    layered = build_index(repo, tmp_path / "on", display_root="repo", progress=False)
    plain = build_index(repo, tmp_path / "off", IndexParams(layers=False), display_root="repo", progress=False)
    assert layered.chunks > plain.chunks

    def records(index_dir: Path) -> dict[str, index_module.FileRecord]:
        generation = current_generation(index_dir)
        assert generation is not None
        raw = json.loads((generation / "files.json").read_text())
        return {rel: index_module.FileRecord.from_json(rel, value) for rel, value in raw.items()}

    on, off = records(tmp_path / "on")["docs/models.md"], records(tmp_path / "off")["docs/models.md"]
    assert [on.chunks[i] for i in primary_chunks(on.chunks)] == [off.chunks[i] for i in primary_chunks(off.chunks)]
    windows = [c for c in on.chunks if "Architecture | Models | LoRA" in c.context]
    assert windows and all(c.end - c.start <= TABLE_WINDOW_SIZE for c in windows)

    hit = Retriever.open(tmp_path / "on").search("Family42 architecture", 1)[0]
    assert hit.file_path == "repo/docs/models.md"
    assert "Family42ForCausalLM" in MODELS_DOC[hit.start : hit.end]
    assert hit.end - hit.start <= TABLE_WINDOW_SIZE  # the window, not a 2,000-character chunk


def test_an_edit_tokenizes_only_the_changed_files_and_equals_a_full_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write_repo(tmp_path / "repo")
    inc, full = tmp_path / "inc", tmp_path / "full"
    build_index(repo, inc, display_root="repo", progress=False)
    (repo / "pkg/engine.py").write_text("class LLMEngine:\n    def step(self) -> None:\n        pass\n")
    (repo / "docs/install.md").unlink()
    (repo / "docs/new.md").write_text("# Speculative decoding\n\nDraft models propose tokens.\n")

    built: list[int] = []
    real_build = _core.Bm25Index.build

    def counting_build(docs: list[str], **kwargs: Any) -> _core.Bm25Index:
        built.append(len(docs))
        return real_build(docs, **kwargs)

    monkeypatch.setattr(_core.Bm25Index, "build", staticmethod(counting_build))
    build_index(repo, inc, display_root="repo", progress=False)
    monkeypatch.undo()
    live = current_generation(inc)
    assert live is not None
    changed = list(json.loads((live / FILES_TABLE).read_text()).items())
    new_chunks = sum(len(rec[3]) for rel, rec in changed if rel in ("pkg/engine.py", "docs/new.md"))
    assert built and sum(built[0::3]) == new_chunks  # the chunks' index: the two changed files' chunks alone

    build_index(repo, full, display_root="repo", progress=False)
    rebuilt = current_generation(full)
    assert rebuilt is not None
    for name in (*BM25_FILES, CHUNKS_TABLE, HEADINGS_TABLE, SYMBOLS_TABLE, FILES_TABLE):
        assert (live / name).read_bytes() == (rebuilt / name).read_bytes(), name
    assert snapshot(inc) == snapshot(full)


def test_documents_are_reused_only_from_texts_made_alike(tmp_path: Path) -> None:
    assert texts_fingerprint("") == texts_fingerprint("")
    assert texts_fingerprint("") != texts_fingerprint("repo-a")
    repo = write_repo(tmp_path / "repo")
    build_index(repo, tmp_path / "ix", display_root="repo", progress=False)
    gen = current_generation(tmp_path / "ix")
    assert gen is not None
    manifest = json.loads((gen / "manifest.json").read_text())
    assert manifest["texts"] == texts_fingerprint("")


def test_files_table_is_written_as_json_dumps_writes_it(tmp_path: Path) -> None:
    """The files table joins each record's memoised JSON text: the bytes are those ``json.dumps`` gives the dict."""
    repo = write_repo(
        tmp_path / "repo", {**SAMPLE_FILES, "docs/ünïcode.md": '# Grüße\n\nText mit "Zitat" und \\ Strich.\n'}
    )
    build_index(repo, tmp_path / "index", display_root="repo", progress=False)
    live = current_generation(tmp_path / "index")
    assert live is not None
    text = (live / FILES_TABLE).read_text(encoding="utf-8")
    raw = json.loads(text)
    records = [FileRecord.from_json(rel, rec) for rel, rec in raw.items()]
    assert "docs/ünïcode.md" in raw and len(records) > 2
    assert text == json.dumps(raw, ensure_ascii=False) == files_table(records)
    assert all(r.encoded is not None for r in records)  # made once, kept for the next build
    assert files_table([]) == json.dumps({})
