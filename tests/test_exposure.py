"""Safe by default on a network: tokens that are tokens, and ``mcp --transport http`` guarded as ``serve`` is.

Real processes on loopback only: ``--host 0.0.0.0`` binds every interface of this machine, and every
request goes to 127.0.0.1 (the "off loopback" policy is the bind's, not the client's). The MCP
sessions use the official SDK's client (``mcp.client.streamable_http``) with the bearer token. The
stdio transport is driven line by line: every line written gets a reply.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import run_cli, stop_process
from fastrag.errors import UsageError
from fastrag.server.auth import TOKEN_ENV, access_for, token_arg
from test_server import make_project

START_TIMEOUT_S = 60
REPLY_TIMEOUT_S = 30
TOKEN = "mcp-token-for-tests"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, "FASTRAG_MODEL")}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("exposure"))


# ----------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("value", [True, "True", "true", "", "  ", "False", "two words"])
def test_a_token_must_be_a_token(value: Any) -> None:
    with pytest.raises(UsageError, match="--token needs a token"):
        token_arg(value)
    with pytest.raises(UsageError):
        access_for("0.0.0.0", value, env={})
    assert token_arg(" s3cret ") == "s3cret" and token_arg(None) is None


def test_an_empty_environment_token_is_generated_and_a_boolean_one_refused() -> None:
    assert access_for("0.0.0.0", env={TOKEN_ENV: "  "}).generated
    with pytest.raises(UsageError, match=r"\$FASTRAG_TOKEN needs a token"):
        access_for("0.0.0.0", env={TOKEN_ENV: "True"})


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize("flag", [["--token"], ["--token="], ["--token", "--port", "0"], ["--token", "true"]])
def test_the_cli_refuses_a_bare_or_empty_token(project: Path, command: str, flag: list[str]) -> None:
    args = [command, *(["--transport", "http"] if command == "mcp" else []), "--host", "0.0.0.0", "--port", "0", *flag]
    result = run_cli(*args, cwd=project, timeout=START_TIMEOUT_S)  # before the fix: serving, with the token "True"
    assert result.code == 2 and result.out == "", (result.code, result.out, result.err)
    # "needs a value" (the argument check) or "needs a token" (the server's own check)
    assert len(result.err_lines) == 1 and result.err_lines[0].startswith("fastrag: error: --token needs a ")


# ----------------------------------------------------------------------------- mcp --transport http off loopback


def start(args: list[str], cwd: Path, prefix: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``python -m fastrag ARGS``; return the process, its first stdout line and its stderr lines so far."""
    proc = subprocess.Popen([sys.executable, "-m", "fastrag", *args], cwd=cwd, env=environment(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    first: list[str] = []
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    line = first[0].strip() if first else ""
    if not line.startswith(prefix):
        stop_process(proc)
        pytest.fail(f"no {prefix!r} line: {line!r} {err}")
    return proc, line, err


@pytest.fixture()
def exposed_mcp(project: Path) -> Iterator[tuple[int, str]]:
    """``mcp --transport http --host 0.0.0.0 --port 0`` without a token: its port and the generated token."""
    proc, line, err = start(["mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "0"], project,
                            "fastrag mcp serving on http://0.0.0.0:")  # fmt: skip
    try:
        for _ in range(200):
            if any("access token" in e for e in err):
                break
            threading.Event().wait(0.05)
        (announced,) = [e for e in err if "access token" in e]
        yield int(line.rsplit(":", 1)[1].split("/")[0]), announced.split("access token ", 1)[1].split()[0]
    finally:
        stop_process(proc)
    assert sum(e.count(announced.split("access token ", 1)[1].split()[0]) for e in err) == 1  # printed once


def post(port: int, headers: dict[str, str], body: Any = INITIALIZE) -> tuple[int, str]:
    """A JSON-RPC POST to the MCP endpoint on 127.0.0.1 (whatever ``Host`` the headers name)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REPLY_TIMEOUT_S)
    try:
        base = {"host": f"127.0.0.1:{port}", "content-type": "application/json",
                "accept": "application/json, text/event-stream"}  # fmt: skip
        connection.request("POST", "/mcp", body=json.dumps(body).encode(), headers={**base, **headers})
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_mcp_over_http_off_loopback_refuses_and_then_works(exposed_mcp: tuple[int, str]) -> None:
    port, token = exposed_mcp
    auth = {"authorization": f"Bearer {token}"}
    refusals = {
        "no token": ({}, 401),
        "a bare token": ({"authorization": "Bearer"}, 401),
        "an empty token": ({"authorization": "Bearer  "}, 401),
        "a wrong token": ({"authorization": "Bearer wrong"}, 401),
        "the token without Bearer": ({"authorization": token}, 401),
        "a foreign Host": ({**auth, "host": f"evil.example:{port}"}, 400),
        "a foreign Host, as DNS rebinding sends it": (
            {**auth, "host": f"evil.example:{port}", "origin": f"http://evil.example:{port}"}, 400),
        "a foreign Origin on a write": ({**auth, "origin": "http://evil.example"}, 403),
    }  # fmt: skip
    for what, (headers, status) in refusals.items():
        got, body = post(port, headers)  # before the fix: 200 for every one of them
        assert got == status, (what, got, body)
        assert "error" in json.loads(body), (what, body)
    assert post(port, auth)[0] == 200  # the right token and an allowed Host
    assert post(port, {**auth, "origin": f"http://127.0.0.1:{port}"})[0] == 200  # a same-origin page

    async def session() -> None:
        client = httpx2.AsyncClient(headers=auth, timeout=REPLY_TIMEOUT_S)
        async with (
            client,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (read, write, *_),
            ClientSession(read, write) as opened,
        ):
            await opened.initialize()
            found = await opened.call_tool("search", {"query": "load a LoRA adapter", "k": 2})
            assert not found.is_error and found.structured_content
            assert found.structured_content["hits"][0]["path"].startswith("data/raw/repo/")

    anyio.run(session)


def test_mcp_over_http_on_loopback_answers_loopback_names_only(project: Path) -> None:
    proc, line, _ = start(
        ["mcp", "--transport", "http", "--port", "0"], project, "fastrag mcp serving on http://127.0.0.1:"
    )
    try:
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        assert post(port, {})[0] == 200  # no token on loopback
        assert post(port, {"host": f"evil.example:{port}"})[0] == 400
        assert post(port, {"origin": "http://evil.example"})[0] == 403
    finally:
        stop_process(proc)


# ----------------------------------------------------------------------------- every stdio line gets a reply


class Stdio:
    """``fastrag mcp`` on stdio, written to and read from line by line, every read bounded in time."""

    def __init__(self, cwd: Path) -> None:
        pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        self.proc = subprocess.Popen([sys.executable, "-m", "fastrag", "mcp"], cwd=cwd, env=environment(), **pipes)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        got: list[bytes] = []
        stdout = self.proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(REPLY_TIMEOUT_S)
        assert got and got[0], "no reply"  # before the fix: nothing, and a client without a timeout hangs
        message: dict[str, Any] = json.loads(got[0])
        return message

    def call(self, name: str, arguments: Any, ident: int = 7) -> dict[str, Any]:
        request = {
            "jsonrpc": "2.0",
            "id": ident,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        self.send(json.dumps(request).encode())
        return self.reply()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        stop_process(self.proc, terminate=False)  # the end of stdin ends the session


@pytest.fixture()
def stdio(project: Path) -> Iterator[Stdio]:
    server = Stdio(project)
    try:
        server.send(json.dumps(INITIALIZE).encode())
        assert server.reply()["result"]["serverInfo"]["name"] == "fastrag"
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield server
    finally:
        server.close()


def tool_error(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert result["isError"] is True, result
    text: str = result["content"][0]["text"]
    assert "\n" not in text, text
    return text


def test_every_stdio_line_gets_a_reply(stdio: Stdio) -> None:
    stdio.send(b"{not json")
    assert stdio.reply() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    stdio.send(b'{"jsonrpc": "2.0", "id": 5, "method": 42}')
    assert stdio.reply()["error"] == {"code": -32600, "message": "Invalid Request"}
    # a lone surrogate, as JSON may spell it: answered, the query echoed with a replacement character
    stdio.send(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", '
               b'"params": {"name": "search", "arguments": {"query": "\\ud800 lora adapter", "k": 2}}}')  # fmt: skip
    reply = stdio.reply()
    assert reply["id"] == 6 and reply["result"]["structuredContent"]["query"] == "\ufffd lora adapter"
    assert reply["result"]["structuredContent"]["hits"]
    assert stdio.call("search", {"query": "lora", "k": 2})["result"]["structuredContent"]["hits"]  # still serving


def test_tool_arguments_are_strict_and_errors_one_line(stdio: Stdio) -> None:
    # before the fix: k=true searched with k=1, top_k was ignored, and the pydantic text ran over lines
    assert (
        tool_error(stdio.call("search", {"query": "lora", "k": True})) == "k: Input should be a valid integer, got True"
    )
    assert tool_error(stdio.call("search", {"query": "lora", "top_k": 3})).startswith(
        "unknown argument 'top_k' of search"
    )
    assert tool_error(stdio.call("read_span", {"path": "x", "start": "0", "end": 5})).startswith("start: Input should")
    assert tool_error(stdio.call("search", {"query": 42})).startswith("query: Input should be a valid string")
    assert "bad path glob '['" in tool_error(stdio.call("search", {"query": "lora", "path": ["["]}))
    assert tool_error(stdio.call("index_status", {"verbose": True})).startswith("unknown argument 'verbose'")
    hits = stdio.call("search", {"query": "lora adapter", "k": 2})["result"]["structuredContent"]["hits"]
    assert 1 <= len(hits) <= 2
