"""Nothing but ``.fastrag/`` is written into a user's repository: every command, the page's actions and every MCP
tool run inside a fresh ``git init`` repository, whose ``git status --porcelain --ignored`` then shows only
``.fastrag/``; the models land in the user's cache (``$XDG_CACHE_HOME/fastrag``).

The answers come from the packaged SmolLM2 (offline, no hub); the user's home and cache are the test's folders.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import SAMPLE_FILES, payload, run_cli, running_server, write_repo
from fastrag.config import version

QUESTION = "How do I load a LoRA adapter dynamically?"


def git(repo: Path, *args: str) -> str:
    """Run ``git ARGS`` in ``repo`` (a fixed author, no user configuration); its stdout."""
    command = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=True).stdout


def git_status(repo: Path) -> list[str]:
    """``git status --porcelain --ignored``: every untracked, changed or ignored entry of ``repo``."""
    return git(repo, "status", "--porcelain", "--ignored").splitlines()


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed ``git init`` repository of the sample files; a home and a cache of the test's own."""
    root = write_repo(tmp_path / "work" / "repo")
    git(root, "init", "--quiet")
    git(root, "add", ".")
    git(root, "commit", "--quiet", "-m", "sample")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("FASTRAG_MODELS_DIR", raising=False)
    assert git_status(root) == []
    return root


def ok(*args: str, cwd: Path, timeout: float = 300) -> str:
    """Run ``python -m fastrag ARGS`` in ``cwd``; its stdout, once it succeeded."""
    result = run_cli(*args, cwd=cwd, timeout=timeout)
    assert result.code == 0, (args, result.err)
    return result.out


def test_every_command_and_tool_leaves_only_dot_fastrag(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "sets"  # a dataset lives where the user keeps it, here outside the repository
    dataset = outside / "dataset_docs_tiny.json"
    dataset.parent.mkdir()
    source = {"file_path": "docs/lora.md", "first_character_index": 0, "last_character_index": 120}
    truth = [{"question_id": "q1", "question": QUESTION, "sources": [source], "answer": "POST /v1/load_lora_adapter"}]
    dataset.write_text(json.dumps({"rag_questions": truth}))
    package = repo / "pkg"

    assert "vectors:" in ok("index", "--vectors", "docs", cwd=package)  # the embedder's files too
    assert "engine.py" in ok("search", "load lora adapter", "--k", "3", cwd=package)
    assert "LLMEngine" in ok("definitions", "LLMEngine", cwd=package)
    assert "engine.py" in ok("references", "add_request", cwd=repo)
    assert "LLMEngine" in ok("outline", "pkg/engine.py", cwd=repo)
    assert "def " in ok("grep", "def ", cwd=repo)
    assert "Sources:" in ok("answer", QUESTION, "--k", "3", "--model", "smollm2", "--max_new_tokens", "16", cwd=package)
    assert "saved 1 results" in ok("search_dataset", "--dataset_path", str(dataset), "--k", "3", cwd=repo)
    results = repo / ".fastrag/output/search_results/dataset_docs_tiny.json"
    assert "recall@1" in ok("evaluate", "--student_search_results_path", str(results), "--dataset_path", str(dataset),
                            cwd=repo)  # fmt: skip
    answered = ok("answer_dataset", "--student_search_results_path", str(results), "--model", "smollm2",
                  "--max_new_tokens", "16", cwd=repo)  # fmt: skip
    assert "saved 1 answers" in answered
    answers = repo / ".fastrag/output/search_results_and_answer/dataset_docs_tiny.json"
    assert "answers scored" in ok("evaluate_answers", "--answers_path", str(answers), "--dataset_path", str(dataset),
                                  cwd=repo)  # fmt: skip

    assert "watching" in watched(repo)

    with running_server(repo, "--model", "smollm2") as address:  # the page's search and Ask
        assert httpx.post(f"{address}/search", json={"query": QUESTION, "k": 3}, timeout=60).status_code == 200
        asked = httpx.post(f"{address}/answer", json={"query": QUESTION, "k": 3, "max_new_tokens": 16}, timeout=300)
        assert asked.status_code == 200, asked.text

    with open(repo.parent / "mcp-stderr.txt", "w") as log:
        tools = anyio.run(every_tool, repo, log)
    assert tools["answer"]["answer"] and tools["index_status"]["files"] == len(SAMPLE_FILES)
    assert tools["index_status"]["repository"] == "repo" and tools["index_status"]["version"] == version()
    assert tools["server_version"] == version() != "unknown"

    assert git_status(repo) == ["!! .fastrag/"]
    models = Path(os.environ["XDG_CACHE_HOME"]) / "fastrag" / "models"
    assert any(models.iterdir()), "the answer model's files belong in the user's cache"


def watched(repo: Path) -> str:
    """``fastrag watch`` in ``repo`` until it says it is watching (at most a minute), then Ctrl-C; its stderr."""
    with open(repo.parent / "watch-stderr.txt", "w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "fastrag", "watch"], cwd=repo, stdout=subprocess.DEVNULL,
                                stderr=log)  # fmt: skip
        try:
            for _ in range(600):
                if "watching" in Path(log.name).read_text() or proc.poll() is not None:
                    break
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        return Path(log.name).read_text()


async def every_tool(repo: Path, log: TextIO) -> dict[str, Any]:
    """Call every MCP tool of ``fastrag mcp`` started in ``repo`` (official client SDK); their results by name."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "fastrag", "mcp", "--model", "smollm2"],
                                   cwd=repo, env=env)  # fmt: skip
    calls: dict[str, dict[str, Any]] = {
        "search": {"query": QUESTION, "k": 3},
        "answer": {"question": QUESTION, "k": 3},
        "index_status": {},
        "find_definitions": {"name": "LLMEngine"},
        "find_references": {"name": "add_request"},
        "outline": {"path": "pkg/engine.py"},
        "grep": {"pattern": "def "},
    }
    async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        listed = {t.name for t in (await session.list_tools()).tools}
        assert listed == {*calls, "read_span"}
        out: dict[str, Any] = {n: payload(await session.call_tool(n, a)) for n, a in calls.items()}
        hit = out["search"]["hits"][0]
        span = {"path": hit["path"], "start": hit["start"], "end": hit["end"]}
        out["read_span"] = payload(await session.call_tool("read_span", span))
        out["server_version"] = started.server_info.version
    return out


def test_a_data_science_repository_is_not_taken_for_fastrags_checkout(repo: Path) -> None:
    """``data/raw``, ``data/processed``, ``data/models`` of the user's own: fastrag writes beside them in
    ``.fastrag/`` only, never into them."""
    for folder in ("data/raw", "data/processed", "data/models"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "keep.txt").write_text("the user's\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "data")
    assert "indexed" in ok("index", "--vectors", "none", cwd=repo)
    assert "engine.py" in ok("search", "load lora adapter", "--k", "3", cwd=repo / "data")
    assert git_status(repo) == ["!! .fastrag/"]
    assert sorted(p.name for p in (repo / "data/processed").iterdir()) == ["keep.txt"]
