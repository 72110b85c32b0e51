"""The server off loopback: a bearer token on every endpoint but ``/healthz``, named hosts, ``Origin`` on writes.

In-process (``fastapi.testclient``) for every refusal, then ``python -m fastrag serve --host 0.0.0.0`` for
real: the generated token printed once, and the same refusals over a socket. Bound to loopback, nothing
changes: no token, no ``Origin`` needed, other ``Host`` names refused as before.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fastrag.cli import REPEATED_SEP, Commands
from fastrag.cli.argv import Call, parse
from fastrag.cli.signatures import commands
from fastrag.server import create_app
from fastrag.server.auth import LOOPBACK_NAMES, TOKEN_ENV, access_for
from test_server import assert_error, make_project

with warnings.catch_warnings():  # Starlette suggests httpx2 for its test client; httpx is what is installed
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "s3cret-token-for-tests"
BIND = "192.0.2.10"  # a non-loopback address (TEST-NET-1): the guard is computed, nothing is bound
SPAN: dict[str, str | int] = {"path": "data/raw/repo/pkg/engine.py", "start": 0, "end": 10}
START_TIMEOUT_S = 60
DATASET = "data/datasets/dataset_docs_auth.json"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample project, indexed, with a one-question dataset in ``data/datasets``."""
    root = make_project(tmp_path_factory.mktemp("auth"))
    (root / DATASET).parent.mkdir(parents=True)
    (root / DATASET).write_text(json.dumps({"rag_questions": [{"question_id": "q", "question": "lora adapter"}]}))
    return root


def client(project: Path, bind: str, host: str, **options: Any) -> TestClient:
    """A client of the app guarded as ``serve --host bind`` guards it, sending ``Host: host``."""
    exposure = access_for(bind, env={}, **options)
    app = create_app(project / "data/processed", project / "data", allowed_hosts=exposure.allowed_hosts,
                     access=exposure.access)  # fmt: skip
    return TestClient(app, base_url=f"http://{host}:5000", raise_server_exceptions=False)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# ----------------------------------------------------------------------------- who is guarded how


def test_loopback_bind_needs_no_token_and_answers_loopback_names() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        exposure = access_for(host, env={TOKEN_ENV: "ignored on loopback"})
        assert exposure.access.token is None and not exposure.access.origin_on_writes and not exposure.generated
        assert exposure.allowed_hosts == LOOPBACK_NAMES


def test_other_binds_get_a_token_and_named_hosts() -> None:
    generated = access_for("0.0.0.0", env={})
    assert generated.generated and generated.access.token and len(generated.access.token) >= 32
    assert generated.access.token != access_for("0.0.0.0", env={}).access.token  # fresh each time
    assert generated.allowed_hosts == (*LOOPBACK_NAMES, "0.0.0.0") and generated.access.origin_on_writes
    from_env = access_for(BIND, env={TOKEN_ENV: " from-env "})
    assert from_env.access.token == "from-env" and not from_env.generated
    given = access_for(BIND, TOKEN, ("box.lan",), env={TOKEN_ENV: "from-env"})
    assert given.access.token == TOKEN and given.allowed_hosts == ("box.lan",)


def test_repeated_allowed_host_flags_are_all_kept() -> None:
    known = commands(Commands)
    argv = ["serve", "--allowed_host", "a.lan", "--port", "0", "--allowed_host=b.lan", "--allowed_host", "c"]
    hosts = "--allowed_host=" + REPEATED_SEP.join(["a.lan", "b.lan", "c"])
    assert parse(known, argv) == Call("serve", [hosts, "--port=0"])
    # a bare flag gets the empty value, which its check refuses (Fire would pass the text "True")
    assert parse(known, ["serve", "--allowed_host"]) == Call("serve", ["--allowed_host="])
    assert parse(known, ["serve", "--allowed_host", "--port", "0"]) == Call("serve", ["--allowed_host=", "--port=0"])


# ----------------------------------------------------------------------------- off loopback, in-process


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/", {}),
        ("GET", "/search", {"params": {"query": "lora"}}),
        ("POST", "/search", {"json": {"query": "lora"}}),
        ("GET", "/span", {"params": SPAN}),
        ("POST", "/index", {"json": {"repo_path": "data/raw/repo"}}),
        ("POST", "/search_dataset", {"json": {"dataset_path": DATASET}}),
        ("POST", "/answer", {"json": {"query": "lora", "k": 0}}),
        ("GET", "/openapi.json", {}),
    ],
)
def test_off_loopback_every_endpoint_wants_the_token(project: Path, method: str, path: str, kwargs: Any) -> None:
    guarded = client(project, BIND, BIND, token=TOKEN)
    origin = {"origin": f"http://{BIND}:5000"}
    bare, empty = {"authorization": "Bearer"}, {"authorization": "Bearer  "}
    for headers in (origin, {**origin, **bearer("wrong")}, {**origin, "authorization": TOKEN}, {**origin, **bare},
                    {**origin, **empty}):  # fmt: skip
        response = guarded.request(method, path, headers=headers, **kwargs)
        assert_error(response, 401, "bearer token")
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert guarded.request(method, path, headers={**origin, **bearer()}, **kwargs).status_code == 200


def test_off_loopback_health_and_assets_are_open(project: Path) -> None:
    guarded = client(project, BIND, BIND, token=TOKEN)
    assert guarded.get("/healthz").json()["status"] == "ok"
    assert guarded.get("/static/app.js").status_code == 200


def test_off_loopback_token_and_allowed_host_succeed(project: Path) -> None:
    guarded = client(project, BIND, BIND, token=TOKEN)
    found = guarded.get("/search", params={"query": "lora adapter", "k": 2}, headers=bearer())
    assert found.status_code == 200 and found.json()["results"]
    span = guarded.get("/span", params=SPAN, headers=bearer())
    assert span.status_code == 200 and span.json()["text"]
    page = guarded.get("/", params={"token": TOKEN})  # the page, opened with its token
    assert page.status_code == 200 and 'id="query"' in page.text
    assert_error(guarded.get("/search", params={"query": "lora", "token": TOKEN}), 401)  # the API: header only
    # every default name: the loopback names and the bound address
    for host in (*LOOPBACK_NAMES, BIND):
        named = client(project, BIND, f"[{host}]" if ":" in host else host, token=TOKEN)
        assert named.get("/search", params={"query": "lora"}, headers=bearer()).status_code == 200, host


def test_off_loopback_foreign_host_is_400_even_with_the_token(project: Path) -> None:
    guarded = client(project, BIND, "evil.example", token=TOKEN)
    origin = {"origin": "http://evil.example:5000"}  # what a DNS-rebinding page sends
    assert_error(guarded.get("/search", params={"query": "lora"}, headers=bearer()), 400, "Host")
    assert_error(guarded.get("/span", params=SPAN, headers={**origin, **bearer()}), 400, "Host")
    assert_error(guarded.post("/index", json={"repo_path": "data/raw/repo"}, headers={**origin, **bearer()}), 400)
    assert_error(guarded.get("/search", params={"query": "lora"}), 400, "Host")  # before the token is even asked
    named = client(project, BIND, "box.lan", token=TOKEN, allowed_hosts=("box.lan",))
    assert named.get("/search", params={"query": "lora"}, headers=bearer()).status_code == 200
    assert_error(client(project, BIND, BIND, token=TOKEN, allowed_hosts=("box.lan",)).get("/healthz"), 400)


def test_off_loopback_writes_need_an_origin(project: Path) -> None:
    guarded = client(project, BIND, BIND, token=TOKEN)
    assert_error(guarded.post("/search", json={"query": "lora"}, headers=bearer()), 403, "Origin")
    same = {"origin": f"http://{BIND}:5000", **bearer()}
    assert guarded.post("/search", json={"query": "lora"}, headers=same).status_code == 200
    other = {"origin": "http://evil.example", **bearer()}
    assert_error(guarded.post("/search", json={"query": "lora"}, headers=other), 403, "cross-origin")


def test_loopback_behaviour_is_unchanged(project: Path) -> None:
    local = client(project, "127.0.0.1", "127.0.0.1")
    assert local.get("/search", params={"query": "lora"}).status_code == 200
    assert local.post("/search", json={"query": "lora"}).status_code == 200  # no token, no Origin needed
    assert local.get("/").status_code == 200 and local.get("/span", params=SPAN).status_code == 200
    assert_error(client(project, "127.0.0.1", "evil.example").get("/healthz"), 400, "Host")
    assert_error(local.post("/search", json={"query": "lora"}, headers={"origin": "http://evil.example"}), 403)


# ----------------------------------------------------------------------------- a real server on 0.0.0.0


@pytest.fixture()
def exposed(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[str], list[str]]]:
    """``serve --host 0.0.0.0 --port 0`` without a token: yields its port, the process, and its stderr lines."""
    make_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "fastrag", "serve", "--host", "0.0.0.0", "--port", "0"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    err: list[str] = []
    pump = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    pump.start()
    first: list[str] = []
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    try:
        line = first[0].strip() if first else ""
        assert line.startswith("fastrag serving on http://0.0.0.0:"), (line, err)
        yield int(line.rsplit(":", 1)[1]), proc, err
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        pump.join(5)


def request(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=b"{}" if method == "POST" else None,
                           headers={"content-type": "application/json", **headers})  # fmt: skip
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serve_on_all_interfaces_prints_a_token_once_and_requires_it(
    exposed: tuple[int, subprocess.Popen[str], list[str]],
) -> None:
    port, proc, err = exposed
    for _ in range(100):  # the token line follows the "serving on" line on stdout
        if any("access token" in line for line in err):
            break
        threading.Event().wait(0.05)
    (line,) = [line for line in err if "access token" in line]
    token = line.split("access token ", 1)[1].split()[0]
    host = {"host": f"127.0.0.1:{port}"}
    auth = {"authorization": f"Bearer {token}"}
    assert request(port, "GET", "/healthz", host)[0] == 200
    assert request(port, "GET", "/search?query=lora", host)[0] == 401
    assert request(port, "GET", "/search?query=lora", {**host, **auth})[0] == 200
    assert request(port, "GET", "/search?query=lora", {"host": f"evil.example:{port}", **auth})[0] == 400
    assert request(port, "GET", f"/?token={token}", host)[0] == 200
    assert request(port, "POST", "/index", {**host, **auth})[0] == 403  # no Origin
    proc.terminate()
    proc.wait(timeout=15)
    threading.Event().wait(0.2)
    assert sum(line.count(token) for line in err) == 1  # printed once, never logged again
