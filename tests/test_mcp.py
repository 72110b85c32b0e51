"""``python -m fastrag mcp`` driven by the MCP SDK's own clients: stdio, and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import SAMPLE_FILES, error_text, payload, run_cli, write_repo
from fastrag.indexing.builder import IndexParams, build_index

QUESTION = "Which endpoint loads a LoRA adapter dynamically?"
TOOLS = {"search", "read_span", "answer", "index_status", "find_definitions", "find_references", "outline", "grep"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``data/raw/repo`` (the sample repository plus a Rust file) indexed into ``data/processed``."""
    root = tmp_path_factory.mktemp("mcp")
    files = {
        **SAMPLE_FILES,
        "core/lib.rs": "/// Loads a LoRA adapter.\npub fn load_lora_adapter() -> u32 {\n    1\n}\n",
    }
    write_repo(root / "data/raw/repo", files)
    build_index(
        root / "data/raw/repo", root / "data/processed", IndexParams(), display_root="data/raw/repo", progress=False
    )
    return root


def environment() -> dict[str, str]:
    """The server's environment: offline, no user model choice."""
    env = {k: v for k, v in os.environ.items() if k != "FASTRAG_MODEL"}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONIOENCODING": "utf-8"}


async def exercise(session: ClientSession) -> None:
    """List the tools and call each, good arguments and bad; the session must survive every error."""
    await session.initialize()
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    by_name = {t.name: t for t in listed.tools}
    assert {"query", "k", "mode", "path", "lang"} <= set(by_name["search"].input_schema["properties"])
    assert by_name["search"].input_schema["required"] == ["query"]
    assert all(len(t.description or "") > 60 for t in listed.tools)

    found = payload(await session.call_tool("search", {"query": QUESTION, "k": 3}))
    hits = found["hits"]
    assert 1 <= len(hits) <= 3 and hits[0]["path"].startswith("data/raw/repo/")
    assert {"path", "start", "end", "first_line", "last_line", "score", "snippet"} <= set(hits[0])
    assert any(h["path"] == "data/raw/repo/docs/lora.md" for h in hits)
    assert "empty" in error_text(await session.call_tool("search", {"query": "   "}))
    assert "k must be between 1 and 10, got 0" in error_text(await session.call_tool("search", {"query": "x", "k": 0}))
    assert "lang must be one of python" in error_text(
        await session.call_tool("search", {"query": "x", "lang": "klingon"})
    )
    assert found["query"] == QUESTION and found["searched"] == QUESTION.rstrip("?")  # as typed, as searched
    slip = payload(await session.call_tool("search", {"query": "load lora adaptre", "k": 3}))
    assert slip["query"] == "load lora adaptre" and slip["searched"] == "load lora adapter"
    rust = payload(await session.call_tool("search", {"query": "load lora adapter", "lang": "rust"}))["hits"]
    assert [h["path"] for h in rust] == ["data/raw/repo/core/lib.rs"]
    docs = payload(await session.call_tool("search", {"query": QUESTION, "path": ["docs/**"]}))["hits"]
    assert docs and all(h["path"].startswith("data/raw/repo/docs/") for h in docs)

    first = hits[0]
    span = payload(
        await session.call_tool("read_span", {"path": first["path"], "start": first["start"], "end": first["end"]})
    )
    assert len(span["text"]) == first["end"] - first["start"] and span["first_line"] == first["first_line"]
    assert first["snippet"][:20] == " ".join(span["text"].split())[:20]
    outside = await session.call_tool("read_span", {"path": "/etc/passwd", "start": 0, "end": 10})
    assert "/etc/passwd is not a file of the index" in error_text(outside)
    assert "not a file of the index" in error_text(
        await session.call_tool("read_span", {"path": "data/processed/CURRENT", "start": 0, "end": 1})
    )
    assert "past the end" in error_text(
        await session.call_tool("read_span", {"path": first["path"], "start": 0, "end": 99_999})
    )

    status = payload(await session.call_tool("index_status", {}))
    assert status["files"] == len(SAMPLE_FILES) + 1 and status["chunks"] > 0 and status["generation"].startswith("gen-")
    assert status["model_loaded"] is False
    assert status["model_note"] is None  # a named model answers as named: nothing to explain

    answered = payload(await session.call_tool("answer", {"question": QUESTION, "k": 2}))
    assert answered["answer"] and answered["cited"]
    assert all(c["citation"] in answered["answer"] for c in answered["cited"])
    assert payload(await session.call_tool("index_status", {}))["model_loaded"] is True


def test_stdio_session(project: Path, tiny_gguf: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fastrag", "mcp", "--model", str(tiny_gguf)],
        cwd=project,
        env=environment(),
    )

    async def main() -> None:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await exercise(session)

    with open(os.devnull, "w") as quiet:
        anyio.run(main)


@pytest.fixture()
def http_server(project: Path, tiny_gguf: Path) -> Iterator[str]:
    """``fastrag mcp --transport http`` on a free loopback port; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrag", "mcp", "--transport", "http", "--port", "0", "--model", str(tiny_gguf)],
        cwd=project,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("fastrag mcp serving on http://127.0.0.1:"), line
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_streamable_http_session(http_server: str) -> None:
    @asynccontextmanager
    async def session() -> AsyncIterator[ClientSession]:
        async with streamable_http_client(http_server) as streams, ClientSession(streams[0], streams[1]) as opened:
            yield opened

    async def main() -> None:
        async with session() as opened:
            await exercise(opened)

    anyio.run(main)


def test_bad_transport_is_one_line(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fastrag", "mcp", "--transport", "carrier-pigeon"],
        cwd=project,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "fastrag: error: --transport must be one of stdio, http, got 'carrier-pigeon'"
    ]


@pytest.mark.parametrize(
    ("client", "where"),
    [("claude", ".mcp.json"), ("cursor", ".cursor/mcp.json"), ("codex", "~/.codex/config.toml"),
     ("vscode", ".vscode/mcp.json")],
)  # fmt: skip
def test_print_config_says_which_file_the_snippet_goes_into(client: str, where: str, tmp_path: Path) -> None:
    """The snippet alone on stdout (redirect it into the file), the file it goes into on stderr."""
    printed = run_cli("mcp", "--print-config", client, cwd=tmp_path)
    assert printed.code == 0 and printed.err_lines == [printed.err_lines[0]], printed.err
    assert printed.err.startswith("fastrag: put this in ") and where in printed.err
    if client != "codex":
        assert "fastrag" in json.loads(printed.out)["servers" if client == "vscode" else "mcpServers"]
    else:
        assert printed.out.startswith("[mcp_servers.fastrag]\n")
