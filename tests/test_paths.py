"""Result paths from any working directory: indexed from the project root, used from elsewhere.

Results keep the form they were indexed with (``data/raw/repo/...``), and whatever reads the files
they name (the answer's prompt, search's snippet lines, the server's ``/span`` and result texts, the MCP
tools, the precision stage) finds them through the repository root the index recorded, not through the
working directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import SAMPLE_FILES, run_cli, write_repo
from fastrag.answering.answer import answer_file
from fastrag.answering.prompt import SpanReader
from fastrag.cli.commands import SCORE_NOTE
from fastrag.indexing.generations import load_index
from fastrag.indexing.reading import IndexedFiles
from fastrag.indexing.sources import SourceRoot

QUERY = "load a lora adapter at runtime"
RESULT = re.compile(r"^\s*\d+\. (\S+):(\d+)-(\d+) ")


@pytest.fixture()
def two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A project indexed from its root (``data/raw/repo``), and an unrelated working directory."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    write_repo(project / "data/raw/repo")
    elsewhere.mkdir()
    indexed = run_cli("index", "--repo_path", "data/raw/repo", cwd=project)
    assert indexed.code == 0, indexed.err
    return project, elsewhere


def spans(search_output: str) -> list[tuple[str, int, int]]:
    found = [RESULT.match(line) for line in search_output.splitlines()]
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in found if m]


def test_search_from_another_directory_prints_the_same_paths(two_dirs: tuple[Path, Path]) -> None:
    project, elsewhere = two_dirs
    here = run_cli("search", QUERY, cwd=project)
    there = run_cli("search", QUERY, "--index_dir", str(project / "data/processed"), cwd=elsewhere)
    assert here.code == there.code == 0, there.err
    assert there.out == here.out  # snippet lines included: the files are read through the recorded root
    lines = here.out.splitlines()
    assert len(lines) == 2 * len(spans(here.out)) + 1  # a snippet line under every hit
    assert lines[-1] == SCORE_NOTE  # what the scores mean
    assert spans(here.out) and all(path.startswith("data/raw/repo/") for path, _, _ in spans(here.out))


def test_result_paths_resolve_through_the_recorded_root(two_dirs: tuple[Path, Path]) -> None:
    project, _ = two_dirs
    manifest = load_index(project / "data/processed").manifest
    root = SourceRoot.of(manifest)
    assert root.display_root == "data/raw/repo" and root.repo_root == (project / "data/raw/repo").resolve()
    assert root.locate("data/raw/repo/docs/lora.md") == root.repo_root / "docs/lora.md"
    assert root.relative("data/raw/repository/x.md") is None  # a sibling sharing the prefix is not inside
    assert root.locate("elsewhere/x.md") == Path("elsewhere/x.md")  # not a file of the index: as written
    reader = SpanReader(IndexedFiles(load_index(project / "data/processed")).text)
    assert reader.text("data/raw/repo/docs/lora.md") == SAMPLE_FILES["docs/lora.md"]
    # an index without a recorded root (hand-made or older) reads paths as written, as before
    assert SourceRoot.of({"display_root": "data/raw/repo"}).locate("data/raw/repo/a.md") == Path("data/raw/repo/a.md")


def test_answer_from_another_directory_reads_the_sources(two_dirs: tuple[Path, Path], tiny_gguf: Path) -> None:
    project, elsewhere = two_dirs
    result = run_cli(
        "answer", QUERY, "--k", "3", "--model", str(tiny_gguf), "--max_new_tokens", "8",
        "--index_dir", str(project / "data/processed"), "--save_directory", "answers", cwd=elsewhere,
    )  # fmt: skip
    assert result.code == 0, result.err
    saved = json.loads((elsewhere / "answers" / answer_file(QUERY)).read_text())["search_results"][0]
    sources = [
        (s["file_path"], s["first_character_index"], s["last_character_index"]) for s in saved["retrieved_sources"]
    ]
    hits = json.loads(run_cli("search", QUERY, "--k", "3", "--json", cwd=project).out)
    assert sources == [(h["path"], h["start"], h["end"]) for h in hits]  # the saved spans: characters


def test_server_from_another_directory_reads_the_right_text(
    two_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from fastrag.server import create_app

    project, elsewhere = two_dirs
    monkeypatch.chdir(elsewhere)
    app = create_app(project / "data/processed", elsewhere / "data")
    with TestClient(app, raise_server_exceptions=False) as client:
        results = client.get("/search", params={"query": QUERY, "k": 3}).json()["results"]
        assert results
        for r in results:
            rel = r["file_path"].removeprefix("data/raw/repo/")
            expected = SAMPLE_FILES[rel][r["first_character_index"] : r["last_character_index"]]
            assert r["file_path"].startswith("data/raw/repo/") and r["text"] == expected
            span = client.get("/span", params={"path": r["file_path"], "start": 0, "end": 20})
            assert span.status_code == 200, span.text
            assert span.json()["text"] == SAMPLE_FILES[rel][:20]
        assert client.get("/span", params={"path": "data/raw/repo/nope.md", "start": 0, "end": 1}).status_code == 404
        assert client.get("/span", params={"path": "/etc/passwd", "start": 0, "end": 1}).status_code == 400


def test_mcp_tools_from_another_directory_read_the_right_text(
    two_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastrag.errors import UserError
    from fastrag.server.mcp import SNIPPET_CHARS, Tools

    project, elsewhere = two_dirs
    monkeypatch.chdir(elsewhere)
    tools = Tools(project / "data/processed", elsewhere / "data")
    try:
        hits = tools.search(QUERY, 3, "hybrid", None, None)["hits"]
        assert hits
        for hit in hits:
            rel = hit["path"].removeprefix("data/raw/repo/")
            text = SAMPLE_FILES[rel]
            assert hit["path"].startswith("data/raw/repo/")
            assert hit["snippet"] == " ".join(text[hit["start"] : hit["end"]].split())[:SNIPPET_CHARS]
            span = tools.read_span(hit["path"], 0, 20)
            assert span["path"] == hit["path"] and span["text"] == text[:20] and span["first_line"] == 1
        with pytest.raises(UserError, match="not a file of the index"):
            tools.read_span("data/raw/repo/nope.md", 0, 1)
        with pytest.raises(UserError, match="/etc/passwd is not a file of the index"):
            tools.read_span("/etc/passwd", 0, 1)
    finally:
        tools.close()
