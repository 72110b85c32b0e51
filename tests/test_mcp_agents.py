"""The MCP tools for coding agents (definitions, references, outline, grep) and every tool's token budget,
through the SDK's stdio client; the server keeps running after every bad argument."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import SAMPLE_FILES, error_text, payload, write_repo
from fastrag.server.budget import estimate, fit

BIG = "\n".join(f"def helper_{i}():\n    return 'Engine {i}'  # Engine" for i in range(400)) + "\n"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with the sample files and a large file, not indexed: the server indexes it."""
    root = write_repo(tmp_path_factory.mktemp("agents") / "proj", {**SAMPLE_FILES, "pkg/big.py": BIG})
    (root / ".git").mkdir()
    return root


async def exercise(session: ClientSession) -> None:
    """Every new tool, good arguments and bad, and the budgets."""
    await session.initialize()
    names = {t.name for t in (await session.list_tools()).tools}
    assert {"find_definitions", "find_references", "outline", "grep"} <= names

    found = payload(await session.call_tool("find_definitions", {"name": "LLMEngine"}))
    first = found["definitions"][0]
    assert (first["path"], first["kind"], first["first_line"], first["last_line"]) == ("pkg/engine.py", "class", 6, 14)
    method = payload(await session.call_tool("find_definitions", {"name": "LLMEngine.add_request"}))["definitions"][0]
    assert method["kind"] == "method" and method["parents"] == ["LLMEngine"]

    refs = payload(await session.call_tool("find_references", {"name": "Engine", "path": ["pkg/big.py"]}))
    assert refs["total"] == 800 and refs["by_place"] == {"string": 400, "comment": 400}
    assert "omitted" in refs and estimate(refs) <= 2000  # trimmed to the default budget
    assert refs["omitted"]["lines"] > 0 and "max_tokens" in refs["omitted"]["note"]

    tree = payload(await session.call_tool("outline", {"path": "pkg/engine.py"}))["definitions"]
    assert [n["name"] for n in tree] == ["LLMEngine", "load_lora_adapter"]
    assert [c["name"] for c in tree[0]["children"]] == ["__init__", "add_request"]

    matched = payload(await session.call_tool("grep", {"pattern": "def \\w+_request", "regex": True}))
    assert matched["total"] == 1 and matched["files"][0]["lines"][0]["line"] == 12
    literal = payload(await session.call_tool("grep", {"pattern": "(", "lang": "markdown"}))
    assert literal["total"] == 0 and literal["files_searched"] == 2
    many = payload(await session.call_tool("grep", {"pattern": "helper_", "max_tokens": 300}))
    assert many["total"] == 400 and estimate(many) <= 300 and many["omitted"]["lines"] > 0

    hits = payload(await session.call_tool("search", {"query": "LoRA adapter", "k": 10, "max_tokens": 200}))
    assert estimate(hits) <= 200 and hits["omitted"]["results"] >= 1

    bad: list[tuple[str, dict[str, Any], str]] = [
        ("find_definitions", {"name": ""}, "the name is empty"),
        ("find_definitions", {"name": "x", "max_tokens": 0}, "max_tokens must be between 100 and 100000, got 0"),
        ("find_definitions", {"name": "x", "max_tokens": 10**9}, "max_tokens must be between 100 and 100000"),
        ("find_references", {"name": "a.b"}, "not a qualified name"),
        ("outline", {"path": "/etc/passwd"}, "/etc/passwd is not a file of the index"),
        ("grep", {"pattern": "(abc", "regex": True}, "invalid regular expression '(abc': unclosed group"),
        ("grep", {"pattern": ""}, "the pattern is empty"),
        ("search", {"query": "x", "max_tokens": 0}, "max_tokens must be between 100 and 100000"),
        ("read_span", {"path": "pkg/engine.py", "start": 0, "end": 5, "max_tokens": -1}, "max_tokens must be"),
    ]
    for tool, args, message in bad:
        assert message in error_text(await session.call_tool(tool, args)), (tool, args)
    assert payload(await session.call_tool("index_status", {}))["files"] == len(SAMPLE_FILES) + 1  # still serving


def test_stdio_tools_on_a_repository_indexed_on_first_use(repository: Path) -> None:
    """`fastrag mcp` started in a repository with no index builds it (progress on stderr), then serves."""
    env = {k: v for k, v in os.environ.items() if k != "FASTRAG_MODEL"}
    env.update(HF_HUB_OFFLINE="1", PYTHONIOENCODING="utf-8", FASTRAG_MODELS_DIR=str(repository.parent / "models"))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fastrag", "mcp"], cwd=repository / "pkg", env=env
    )

    async def main() -> None:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await exercise(session)

    with open(repository.parent / "stderr.txt", "w") as log:
        anyio.run(main)
    assert "indexing it into" in (repository.parent / "stderr.txt").read_text()
    assert (repository / ".fastrag/index/CURRENT").is_file()


def test_fit_trims_results_then_lines() -> None:
    """Whole results from the end first; a single oversized result loses lines; nothing when it fits."""
    small = {"hits": [{"text": "a"}]}
    assert fit(small, "hits", 100) == small
    many = {"hits": [{"text": "x" * 300} for _ in range(10)]}
    cut = fit(many, "hits", 400)
    assert estimate(cut) <= 400 and cut["omitted"]["results"] == 10 - len(cut["hits"]) and cut["hits"]
    one = {"path": "p", "text": "\n".join("y" * 60 for _ in range(100))}
    lines = fit(one, None, 500)
    assert estimate(lines) <= 500 and lines["omitted"]["lines"] > 0
    assert lines["text"].count("\n") + 1 + lines["omitted"]["lines"] == 100


def test_mcp_watch_keeps_the_index_fresh(tmp_path: Path) -> None:
    """`fastrag mcp --watch`: an edit becomes searchable without restarting; index_status says how fresh."""
    root = write_repo(tmp_path / "proj", SAMPLE_FILES)
    (root / ".git").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "FASTRAG_MODEL"}
    env.update(HF_HUB_OFFLINE="1", PYTHONIOENCODING="utf-8", FASTRAG_MODELS_DIR=str(tmp_path / "models"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "fastrag", "mcp", "--watch"], cwd=root, env=env)

    async def main() -> None:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            status = payload(await session.call_tool("index_status", {}))["freshness"]
            assert status["watching"] is True and status["pending_count"] == 0
            await anyio.sleep(0.5)
            (root / "pkg/fresh.py").write_text("def brand_new_function():\n    return 1\n")
            for _ in range(600):
                found = payload(await session.call_tool("find_definitions", {"name": "brand_new_function"}))
                if found["definitions"]:
                    break
                await anyio.sleep(0.05)
            assert found["definitions"][0]["path"] == "pkg/fresh.py"
            status = payload(await session.call_tool("index_status", {}))["freshness"]
            assert status["builds"] >= 1 and status["last_error"] is None

    with open(tmp_path / "stderr.txt", "w") as log:
        anyio.run(main)
