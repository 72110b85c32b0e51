"""The audit's other cases (issue 42): ``index`` removes only what it wrote and never indexes itself; lone
surrogates at every entry; a duplicate JSON key; ``grep`` over files gone since indexing; messages that
name paths once and relative to the project."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import SAMPLE_FILES, run_cli, searched_dataset, write_repo
from fastrag.errors import UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import load_index
from test_exposure import Stdio
from test_server import assert_error, client_for

LEXICAL = IndexParams(embed="none")
#: ``lone <U+D800 as UTF-8 would spell it> q``: bytes no decoder accepts, as a shell passes them.
LONE_SURROGATE_ARG = os.fsdecode(b"lone \xed\xa0\x80 q")


# ----------------------------------------------------------------------------- what index removes


def foreign_folder(path: Path) -> list[Path]:
    """A folder of someone's files whose names look like fastrag's; returns them."""
    files = [path / "gen-1-2/thesis.txt", path / ".draft.tmp", path / "notes.md"]
    for file in files:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("mine")
    return files


def test_index_refuses_a_folder_that_is_not_an_index_and_touches_nothing(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    target = tmp_path / "thesis"
    files = foreign_folder(target)
    with pytest.raises(UserError, match="holds other files and is not a fastrag index"):
        build_index(repo, target, LEXICAL, progress=False)
    result = run_cli("index", "--repo_path", "repo", "--index_dir", "thesis", "--vectors", "none", cwd=tmp_path)
    assert result.code == 1 and len(result.err_lines) == 1, result.err
    assert "thesis holds other files and is not a fastrag index" in result.err
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == [
        ".draft.tmp", "gen-1-2", "gen-1-2/thesis.txt", "notes.md"
    ]  # fmt: skip
    assert all(f.read_text() == "mine" for f in files)


def test_index_keeps_foreign_files_in_its_own_folder(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, LEXICAL, progress=False)
    files = foreign_folder(ix)
    (repo / "pkg/new.py").write_text("NEW = 1\n")
    build_index(repo, ix, LEXICAL, progress=False)  # publishes, prunes
    (repo / "pkg/newer.py").write_text("NEWER = 1\n")
    build_index(repo, ix, LEXICAL, progress=False)
    assert all(f.read_text() == "mine" for f in files)


def test_an_index_inside_its_repository_is_never_indexed(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    for ix in (repo / "index", repo / ".fastrag/index"):
        build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
        (repo / "pkg/more.py").write_text(f"MORE = {len(str(ix))}\n")  # a second run publishes again
        build_index(repo, ix, LEXICAL, display_root="repo", progress=False)
        paths = load_index(ix).chunks.paths
        assert sorted(paths) == sorted(f"repo/{p}" for p in [*SAMPLE_FILES, "pkg/more.py"]), paths


# ----------------------------------------------------------------------------- lone surrogates


def test_a_lone_surrogate_on_the_command_line(indexed: Path) -> None:
    result = run_cli("answer", LONE_SURROGATE_ARG, "--k", "0", cwd=indexed)
    assert result.code == 0 and "Traceback" not in result.err, result.err
    saved = list((indexed / "data/output/search_results_and_answer").glob("answer-lone-*.json"))
    assert len(saved) == 1
    assert json.loads(saved[0].read_text())["search_results"][0]["question"] == "lone \ufffd\ufffd\ufffd q"
    searched = run_cli("search", LONE_SURROGATE_ARG, cwd=indexed)
    assert "Traceback" not in searched.err and searched.code == 0, searched.err


def test_a_lone_surrogate_in_a_results_file(indexed: Path, tiny_gguf: Path) -> None:
    question = {"question_id": "q1", "question": "How do I load a LoRA adapter?"}
    _, results = searched_dataset(indexed, "dataset_docs_lone", [question])
    raw = json.loads(results.read_text())
    raw["search_results"][0]["question"] = raw["search_results"][0]["question_str"] = "lone \ud800 LoRA adapter?"
    results.write_text(json.dumps(raw))  # ensure_ascii: the file spells it "\ud800"
    assert "\\ud800" in results.read_text()
    result = run_cli("answer_dataset", "--student_search_results_path", str(results), "--model", str(tiny_gguf),
                     "--save_directory", "answers", cwd=indexed, timeout=300)  # fmt: skip
    assert result.code == 0 and "Traceback" not in result.err, result.err
    answered = json.loads((indexed / "answers" / results.name).read_text())["search_results"][0]
    assert answered["question"] == "lone \ufffd LoRA adapter?" and answered["answer"]


def test_a_lone_surrogate_and_a_duplicate_key_over_http(indexed: Path) -> None:
    with client_for(indexed) as client:
        body = b'{"query": "lone \\ud800 q", "k": 0}'
        answered = client.post("/answer", content=body, headers={"content-type": "application/json"})
        assert answered.status_code == 200, answered.text
        assert answered.json()["question"] == "lone \ufffd q"
        twice = b'{"query": "lora", "k": 3, "k": 4}'
        refused = client.post("/search", content=twice, headers={"content-type": "application/json"})
        assert_error(refused, 400, "parameter 'k' is given more than once")
        nested = b'{"query": "lora", "path": ["a"], "path": ["b"]}'
        assert client.post("/search", content=nested, headers={"content-type": "application/json"}).status_code == 400


# ----------------------------------------------------------------------------- grep and messages


def test_grep_reports_the_files_it_could_not_read(indexed: Path) -> None:
    (indexed / "repo/docs/install.md").unlink()
    (indexed / "repo/pkg/sampling.py").write_text("# another content\n")
    result = run_cli("grep", "adapter", cwd=indexed)
    assert result.code == 1 and "Traceback" not in result.err, result.err
    assert "repo/docs/lora.md:" in result.out  # what could be read is still searched
    assert result.err_lines[-1] == (  # the suggested command as it was started: python -m fastrag
        "fastrag: error: skipped 2 files: docs/install.md (No such file or directory), pkg/sampling.py (changed "
        "since it was indexed: run `python -m fastrag index` again) (not searched: run `python -m fastrag index` again)"
    )


def test_damage_names_the_file_once_and_api_errors_name_no_folder_of_the_machine(indexed: Path) -> None:
    gen = next((indexed / "data/processed").glob("gen-*"))
    (gen / "bm25.bin").write_bytes((gen / "bm25.bin").read_bytes()[:100] + b"\x00" * 50)
    result = run_cli("search", "lora", cwd=indexed)
    assert result.code == 1 and len(result.err_lines) == 1, result.err
    assert f"({gen.name}/bm25.bin " in result.err and str(gen) not in result.err, result.err
    with client_for(indexed) as client:
        searched = client.get("/search", params={"query": "lora"})
        assert searched.status_code == 503 and str(indexed) not in searched.text, searched.text
        assert f"the index in data/processed is damaged ({gen.name}/bm25.bin" in searched.json()["error"]


# ----------------------------------------------------------------------------- MCP


def test_an_mcp_request_with_an_unusable_id_gets_a_reply(tmp_path: Path) -> None:
    write_repo(tmp_path / "data/raw/repo")
    build_index(tmp_path / "data/raw/repo", tmp_path / "data/processed", LEXICAL, display_root="data/raw/repo",
                progress=False)  # fmt: skip
    stdio = Stdio(tmp_path)
    try:
        for ident in (b'{"a": 1}', b"1.5", b"null", b"true"):
            stdio.send(b'{"jsonrpc": "2.0", "id": ' + ident + b', "method": "tools/list"}')
            reply = stdio.reply()  # before: none, the SDK took the line for a notification
            assert reply == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
    finally:
        stdio.close()
