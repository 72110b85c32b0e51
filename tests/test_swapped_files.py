"""Nothing outside the repository, ever: a file of the index swapped after indexing (for a symbolic link to a
file outside, a folder of its path for a link, by a git branch checkout; for a FIFO, a device, a 100 MB
file) is refused by every reader, the command line, the HTTP API and every MCP tool, and never blocks one.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_FILES, write_repo
from fastrag.cli import main
from fastrag.errors import UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.catalog import open_index
from fastrag.indexing.reading import FileRefused, IndexedFiles
from fastrag.server.mcp import Tools
from test_exposure import INITIALIZE, Stdio
from test_server import client_for

SECRET = "TOPSECRET deploy settings: the passwd of the cluster"
CONFIG = "# Configuration\n\nThe deploy settings of the service: replicas and region.\n"
CONFIG_PATH = "data/raw/repo/docs/config.md"
#: How long a refusal may take, whatever was swapped in.
REFUSAL_S = 1.0
#: The ways a plain file of the index becomes a way out of the repository.
SWAPS = ("file link", "folder link", "git checkout")


def make_project(root: Path) -> Path:
    """A project whose ``data/raw/repo`` holds the sample files and ``docs/config.md``, indexed (no vectors);
    a secret lies outside it, in ``root/outside``."""
    project = root / "project"
    repo = write_repo(project / "data/raw/repo", {**SAMPLE_FILES, "docs/config.md": CONFIG})
    outside = root / "outside"
    outside.mkdir()
    (outside / "config.md").write_text(SECRET)
    (outside / "install.md").write_text(SECRET)
    (outside / "lora.md").write_text(SECRET)
    return repo


def index(repo: Path) -> None:
    project = repo.parents[2]
    build_index(
        repo, project / "data/processed", IndexParams(embed="none"), display_root="data/raw/repo", progress=False
    )


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull}  # fmt: skip
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=60)


def swap(repo: Path, how: str) -> None:
    """Turn ``docs/config.md`` (indexed as a plain file) into a way to the secret outside."""
    outside = repo.parents[3] / "outside"
    if how == "file link":
        (repo / "docs/config.md").unlink()
        (repo / "docs/config.md").symlink_to(outside / "config.md")
    elif how == "folder link":  # every file of docs/ now leads outside: a link in the middle of the path
        shutil.rmtree(repo / "docs")
        (repo / "docs").symlink_to(outside, target_is_directory=True)
    else:
        git(repo, "checkout", "-q", "evil")


@pytest.fixture(params=SWAPS)
def swapped(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The project, indexed, then ``docs/config.md`` swapped for a way outside (each of :data:`SWAPS`)."""
    repo = make_project(tmp_path)
    if request.param == "git checkout":  # a plain file on main, a link to the secret on the branch evil
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "main")
        git(repo, "checkout", "-q", "-b", "evil")
        (repo / "docs/config.md").unlink()
        (repo / "docs/config.md").symlink_to(tmp_path / "outside/config.md")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "evil")
        git(repo, "checkout", "-q", "main")
    index(repo)
    swap(repo, str(request.param))
    return repo.parents[2]


def cli(capsys: pytest.CaptureFixture[str], project: Path, *args: str) -> tuple[int, str, str]:
    """Run the command line in-process on ``project``'s index: exit status, stdout, stderr."""
    capsys.readouterr()
    code = main([*args, "--index_dir", str(project / "data/processed")])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_line_reads_nothing_through_a_swap(
    swapped: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(swapped)
    runs = {
        "search": cli(capsys, swapped, "search", "deploy settings"),
        "grep": cli(capsys, swapped, "grep", "TOPSECRET"),
        "grep deploy": cli(capsys, swapped, "grep", "deploy"),
        "references": cli(capsys, swapped, "references", "passwd"),
        "outline": cli(capsys, swapped, "outline", "docs/config.md"),
        "outline outside": cli(capsys, swapped, "outline", str(swapped.parent / "outside/config.md")),
    }
    for name, (_, out, err) in runs.items():
        assert "TOPSECRET" not in out + err and "passwd" not in out, name
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, (name, err)
    code, out, err = runs["search"]
    assert code == 0 and CONFIG_PATH in out  # the location alone, from the index
    assert "docs/config.md (symbolic link, not followed)" in err
    for name in ("grep", "grep deploy", "references"):  # a search that skipped a file says so and fails
        code, _, err = runs[name]
        assert code == 1 and "docs/config.md (symbolic link, not followed)" in err, (name, err)
    assert runs["outline"][0] == 1 and "cannot read docs/config.md: symbolic link" in runs["outline"][2]
    assert runs["outline outside"][0] == 2 and "is not a file of the index" in runs["outline outside"][2]


def test_the_http_api_reads_nothing_through_a_swap(swapped: Path, tiny_gguf: Path) -> None:
    with client_for(swapped, str(tiny_gguf)) as client:
        span = client.get("/span", params={"path": CONFIG_PATH, "start": 0, "end": 40})
        assert span.status_code == 409, span.text
        assert span.json() == {"error": "cannot read docs/config.md: symbolic link, not followed"}
        searched = client.get("/search", params={"query": "deploy settings", "k": 5})
        assert searched.status_code == 200 and CONFIG_PATH in searched.text and "TOPSECRET" not in searched.text
        answered = client.post("/answer", json={"query": "What are the deploy settings?", "k": 3})
        assert answered.status_code in (200, 400) and "TOPSECRET" not in answered.text, answered.text
        assert "Traceback" not in answered.text
        assert "TOPSECRET" not in client.get("/").text


def every_tool(tools: Tools) -> dict[str, Callable[[], Any]]:
    """Each MCP tool, called on what the swap reaches."""
    agent = tools.agent
    return {
        "search": lambda: tools.search("deploy settings passwd", 5, "lexical", None, None),
        "read_span": lambda: tools.read_span(CONFIG_PATH, 0, 40),
        "read_span outside": lambda: tools.read_span(str(tools.root.parent / "outside/config.md"), 0, 40),
        "answer": lambda: tools.answer("What are the deploy settings?", 3),
        "find_definitions": lambda: agent.find_definitions("LLMEngine", 2000),
        "find_references": lambda: agent.find_references("passwd", None, None, 2000),
        "grep": lambda: agent.grep("cluster", False, False, None, None, 2000),
        "outline": lambda: agent.outline("docs/config.md", 2000),
        "index_status": tools.index_status,
    }


def test_every_mcp_tool_reads_nothing_through_a_swap(swapped: Path, tiny_gguf: Path) -> None:
    tools = Tools(swapped / "data/processed", swapped / "data", str(tiny_gguf))
    try:
        outcomes: dict[str, str] = {}
        for name, call in every_tool(tools).items():
            try:
                outcomes[name] = json.dumps(call())
            except UserError as exc:
                outcomes[name] = f"error: {exc}"
        assert not [name for name, text in outcomes.items() if "TOPSECRET" in text or "passwd of" in text], outcomes
        assert outcomes["read_span"] == "error: cannot read docs/config.md: symbolic link, not followed"
        assert outcomes["outline"].startswith("error: cannot read docs/config.md")
        assert outcomes["read_span outside"].endswith("is not a file of the index")
        grep = json.loads(outcomes["grep"])
        assert (
            grep["unreadable"] >= 1
            and {"path": "docs/config.md", "reason": "symbolic link, not followed"} in grep["unreadable_files"]
        )
    finally:
        tools.close()


def test_mcp_over_stdio_reads_nothing_through_a_swap(tmp_path: Path) -> None:
    repo = make_project(tmp_path)
    index(repo)
    swap(repo, "file link")
    stdio = Stdio(repo.parents[2])
    try:
        stdio.send(json.dumps(INITIALIZE).encode())
        assert stdio.reply()["id"] == 1
        stdio.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        replies = [
            stdio.call("read_span", {"path": CONFIG_PATH, "start": 0, "end": 40}),
            stdio.call("grep", {"pattern": "cluster"}),
            stdio.call("search", {"query": "deploy settings", "k": 5, "mode": "lexical"}),
        ]
        assert not any("TOPSECRET" in json.dumps(r) for r in replies), replies
        assert "cannot read docs/config.md" in replies[0]["result"]["content"][0]["text"]
    finally:
        stdio.close()


# ----------------------------------------------------------------------------- what cannot be read at all


def swap_in(repo: Path, kind: str) -> None:
    """Put a FIFO, a device (a link to ``/dev/zero``) or a 100 MB file where ``docs/config.md`` was."""
    path = repo / "docs/config.md"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as handle:  # sparse: 100 MB at no cost
            handle.truncate(100 * 2**20)


@pytest.fixture()
def indexed_project(tmp_path: Path) -> Path:
    repo = make_project(tmp_path)
    index(repo)
    return repo.parents[2]


@pytest.mark.parametrize("kind", ["fifo", "device", "large"])
def test_special_and_huge_files_are_refused_at_once(indexed_project: Path, kind: str) -> None:
    swap_in(indexed_project / "data/raw/repo", kind)
    files = IndexedFiles(open_index(indexed_project / "data/processed"))
    started = time.monotonic()
    with pytest.raises(FileRefused) as refused:
        files.text(CONFIG_PATH)
    assert time.monotonic() - started < REFUSAL_S
    assert refused.value.rel_path == "docs/config.md"
    assert refused.value.reason in ("not a regular file", "symbolic link, not followed", "larger than 4 MiB")
    with client_for(indexed_project) as client:
        started = time.monotonic()
        span = client.get("/span", params={"path": CONFIG_PATH, "start": 0, "end": 10})
        assert time.monotonic() - started < REFUSAL_S and span.status_code == 409, span.text


@pytest.fixture()
def live_server(indexed_project: Path) -> Iterator[str]:
    """``serve``'s application under uvicorn (as ``serve`` configures it) on a free loopback port; yields
    ``host:port``."""
    import uvicorn

    from fastrag.server.app import create_app
    from fastrag.server.run import bind
    from fastrag.server.timeouts import server_config

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(server_config(create_app(indexed_project / "data/processed", indexed_project / "data")))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def get(address: str, path: str, timeout: float = 10) -> tuple[int, bytes]:
    host, port = address.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serve_keeps_answering_under_fifo_spans(indexed_project: Path, live_server: str) -> None:
    swap_in(indexed_project / "data/raw/repo", "fifo")
    path = f"/span?path={CONFIG_PATH}&start=0&end=10"
    with ThreadPoolExecutor(max_workers=50) as pool:  # before: each one held a worker for ever
        statuses = [status for status, _ in pool.map(lambda _: get(live_server, path), range(50))]
    assert statuses == [409] * 50
    started = time.monotonic()
    status, body = get(live_server, "/healthz", timeout=5)
    assert status == 200 and json.loads(body)["status"] == "ok" and time.monotonic() - started < 5


def test_a_half_sent_request_is_dropped(live_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastrag.server import safety, timeouts

    monkeypatch.setattr(timeouts.HeadTimeoutProtocol, "head_timeout", 0.5)
    monkeypatch.setattr(safety, "BODY_TIMEOUT_S", 0.5)
    host, port = live_server.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as head:
        head.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the head never ends
        started = time.monotonic()
        assert head.recv(1024) == b""  # closed by the server, unanswered
        assert time.monotonic() - started < 5
    with socket.create_connection((host, int(port)), timeout=10) as body:
        body.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"query\"")  # fmt: skip
        started = time.monotonic()
        answer = b""
        while b"}" not in answer and (chunk := body.recv(4096)):  # the head, then the JSON body
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"not received within" in answer, answer
        assert time.monotonic() - started < 5
    assert get(live_server, "/healthz")[0] == 200
