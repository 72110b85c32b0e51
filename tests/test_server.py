"""The HTTP API in-process (``fastapi.testclient``): every endpoint, every error, on the sample repository.

The project layout is the real one in miniature: ``data/raw/repo`` indexed into ``data/processed``, result
paths ``data/raw/repo/...`` relative to the project root; answers come from the tiny random Qwen3 GGUF.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_FILES, linked_project, run_cli, write_repo
from fastrag.answering.prompt import NO_SOURCES_ANSWER
from fastrag.config import DEFAULT_MODE, MODES
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import ChunkTable, current_generation
from fastrag.retrieval.retriever import clean_query
from fastrag.server import answers as answers_module
from fastrag.server import create_app
from fastrag.server import routes as routes_module
from fastrag.server.cache import LruCache
from fastrag.server.run import bind
from fastrag.server.safety import MAX_BODY_BYTES
from fastrag.server.services import services

with warnings.catch_warnings():  # Starlette suggests httpx2 for its test client; httpx is what is installed
    warnings.simplefilter("ignore")
    from fastapi.routing import APIRoute, APIRouter
    from fastapi.testclient import TestClient

LORA_QUESTION = "Which endpoint loads a LoRA adapter dynamically?"


def make_project(root: Path, files: dict[str, str] = SAMPLE_FILES, max_chunk_size: int = 2000) -> Path:
    """``root/data/raw/repo`` written and indexed into ``root/data/processed``; returns ``root``."""
    write_repo(root / "data/raw/repo", files)
    index(root, max_chunk_size)
    return root


def index(root: Path, max_chunk_size: int = 2000) -> None:
    """(Re)build the index as another process would (``python -m fastrag index --vectors none``):
    lexical, so that these tests are about the server; those about its vectors build their own."""
    params = IndexParams(max_chunk_size=max_chunk_size, target_size=max_chunk_size, embed="none")
    build_index(root / "data/raw/repo", root / "data/processed", params, display_root="data/raw/repo", progress=False)


def client_for(root: Path, model: str | None = None, **options: Any) -> TestClient:
    app = create_app(root / "data/processed", root / "data", model, **options)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only project shared by the tests that do not change it."""
    return make_project(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def client(project: Path, tiny_gguf: Path) -> Iterator[TestClient]:
    """One app for the module (the tiny model loads once)."""
    with client_for(project, str(tiny_gguf)) as test_client:
        yield test_client


def events(body: str) -> list[tuple[str, Any]]:
    """Parse a server-sent-events body into ``(event name, JSON data)`` pairs."""
    parsed = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].lstrip(" "))
        parsed.append((name, json.loads("\n".join(data))))
    return parsed


def assert_error(response: Any, status: int, *fragments: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and body["error"], body
    assert "Traceback" not in response.text
    for fragment in fragments:
        assert fragment in body["error"], body


# ----------------------------------------------------------------------------- health, schema, page


def test_healthz_reports_index_and_model(client: TestClient, project: Path) -> None:
    health = client.get("/healthz").json()
    assert health["status"] == "ok"
    live = current_generation(project / "data/processed")
    assert live is not None and health["generation"] == live.name
    assert health["files"] == len(SAMPLE_FILES) and health["chunks"] >= len(SAMPLE_FILES)
    assert health["vectors"] is False and health["index_error"] is None
    assert health["repository"] == "data/raw/repo"  # the page names the repository it serves


def test_the_page_names_the_repository_and_clears_old_results(client: TestClient) -> None:
    """The page says what it serves (from /healthz), asks nothing of vLLM, and a new query clears the old one."""
    page, script = client.get("/").text, client.get("/static/app.js").text
    assert 'id="served"' in page and "LoRA" not in page and "vLLM" not in page
    assert "health.repository" in script and "health.files" in script
    assert script.count("clearAll();") == 2  # a search and a question each start from an empty page
    assert "enclosing(path" in script  # a citation opens the whole retrieved span it lies in


def test_healthz_names_the_default_model_in_use(project: Path) -> None:
    """Without --model and without a Qwen3 export, the packaged SmolLM2 answers: /healthz says so and why."""
    health = client_for(project).get("/healthz").json()
    assert health["model"] == "smollm2" and health["model_loaded"] is False
    assert "Qwen/Qwen3-0.6B" in health["model_note"] and "not exported" in health["model_note"]


def test_openapi_documents_every_endpoint(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert set(paths) >= {"/search", "/answer", "/index", "/search_dataset", "/healthz", "/span"}
    assert {"get", "post"} <= set(paths["/search"])
    assert {p["name"] for p in paths["/search"]["get"]["parameters"]} == {"query", "k", "mode", "path", "lang"}
    body = paths["/answer"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/x-www-form-urlencoded"} <= set(body)
    assert "stream" in body["application/json"]["schema"]["properties"]


def test_every_route_dependency_runs_on_the_event_loop() -> None:
    # a plain-function dependency runs in the thread pool: one more thread hop on every request
    # (measured: ~15% of a lexical search's throughput); every one must be a coroutine function
    def dependencies(dependant: Any) -> Iterator[Any]:
        for sub in dependant.dependencies:
            yield sub.call
            yield from dependencies(sub)

    routers = [r for r in vars(routes_module).values() if isinstance(r, APIRouter)]
    routes = [r for router in routers for r in router.routes if isinstance(r, APIRoute)]
    assert {"/search", "/answer", "/index"} <= {r.path for r in routes}
    calls = [call for route in routes for call in dependencies(route.dependant)]
    assert any(call is services for call in calls)
    assert [c for c in calls if not inspect.iscoroutinefunction(c)] == []


def test_page_and_assets_are_served_offline(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp  # no inline script or style may run
    for asset, kind in (("app.js", "javascript"), ("syntax.js", "javascript"), ("app.css", "text/css")):
        assert f"/static/{asset}" in page.text
        served = client.get(f"/static/{asset}")
        assert served.status_code == 200 and kind in served.headers["content-type"], asset
        assert "http://" not in served.text and "https://" not in served.text, f"{asset} references the network"
    assert "http://" not in page.text and "https://" not in page.text
    for element in ('id="query"', 'id="k"', 'id="mode"', 'id="ask-button"', 'id="results"'):
        assert element in page.text


# ----------------------------------------------------------------------------- search


def test_search_get_json_and_form_agree(client: TestClient, project: Path) -> None:
    params: dict[str, Any] = {"query": "load_lora_adapter", "k": 3, "mode": "lexical"}
    by_get = client.get("/search", params=params).json()
    by_json = client.post("/search", json=params).json()
    by_form = client.post("/search", data={k: str(v) for k, v in params.items()}).json()
    assert by_get == by_json == by_form
    results = by_get["results"]
    assert 1 <= len(results) <= 3 and by_get["k"] == 3 and by_get["mode"] == "lexical"
    assert results[0]["file_path"].startswith("data/raw/repo/")
    for rank, hit in enumerate(results, 1):
        text = (project / hit["file_path"]).read_text(encoding="utf-8")
        start, end = hit["first_character_index"], hit["last_character_index"]
        assert hit["rank"] == rank and hit["text"] == text[start:end]
        assert hit["first_line"] == text.count("\n", 0, start) + 1
        assert hit["last_line"] == text.count("\n", 0, end - 1) + 1


def test_search_reads_a_mistyped_word_as_the_index_spells_it(client: TestClient) -> None:
    typed = client.get("/search", params={"query": "load lora adaptre?", "k": 3}).json()
    right = client.get("/search", params={"query": "load lora adapter", "k": 3}).json()
    assert typed["query"] == "load lora adaptre" and typed["searched"] == "load lora adapter" == right["searched"]
    assert typed["results"] == right["results"]


def test_search_reads_a_message_as_every_other_caller_does(client: TestClient) -> None:
    # a message whose cleaned text would clean further ("ZodType for me. A customer reported a bug and I have to
    # reply …" → "reply …"): the API cleans it once, as the CLI and MCP do, and says what it searched
    message = "Locate load_lora_adapter for me. A customer reported a bug and I have to reply with something by EOD."
    served = client.get("/search", params={"query": message, "k": 3, "mode": "lexical"}).json()
    assert served["searched"] == served["query"] == clean_query(message) != clean_query(clean_query(message))
    assert {r["file_path"] for r in served["results"]} <= {"data/raw/repo/docs/lora.md", "data/raw/repo/pkg/engine.py"}
    assert served["results"]


def test_search_finds_the_lora_files(client: TestClient) -> None:
    results = client.get("/search", params={"query": LORA_QUESTION, "k": 5}).json()["results"]
    assert {r["file_path"] for r in results} >= {"data/raw/repo/docs/lora.md", "data/raw/repo/pkg/engine.py"}


def test_search_filters_by_path_and_language(client: TestClient) -> None:
    def paths(response: Any) -> set[str]:
        assert response.status_code == 200, response.text
        return {r["file_path"] for r in response.json()["results"]}

    query: dict[str, Any] = {"query": LORA_QUESTION, "k": 5}
    docs = client.get("/search", params={**query, "path": "docs/**"})
    assert paths(docs) == {"data/raw/repo/docs/lora.md"} and docs.json()["filter"] == {
        "path": ["docs/**"],
        "lang": None,
    }
    both = client.get("/search", params=[*query.items(), ("path", "docs/lora.md"), ("path", "pkg/*.py")])
    assert paths(both) == {"data/raw/repo/docs/lora.md", "data/raw/repo/pkg/engine.py"}
    assert paths(client.post("/search", json={**query, "lang": "python"})) == {"data/raw/repo/pkg/engine.py"}
    assert paths(client.post("/search", data={**query, "path": "*.md", "lang": "md"})) == {"data/raw/repo/docs/lora.md"}
    assert_error(client.get("/search", params={**query, "lang": "klingon"}), 400, "lang must be one of python")
    assert_error(client.post("/search", json={**query, "path": [3]}), 400, "path needs a glob")


def test_search_cache_hits_then_index_change_invalidates(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    client = client_for(root)
    first = client.get("/search", params={"query": "scheduler queue", "k": 2})
    assert first.headers["x-cache"] == "miss"
    again = client.get("/search", params={"query": "scheduler queue", "k": 2})
    assert again.headers["x-cache"] == "hit" and again.json() == first.json()
    assert client.get("/search", params={"query": "scheduler queue", "k": 3}).headers["x-cache"] == "miss"
    # another process re-indexes a changed repository: the next search sees the new generation
    (root / "data/raw/repo/pkg/scheduler.py").write_text('"""The scheduler queue: zanzibar ordering."""\n')
    index(root)
    after = client.get("/search", params={"query": "scheduler queue", "k": 2})
    assert after.headers["x-cache"] == "miss"
    assert after.json()["generation"] != first.json()["generation"]
    assert client.get("/search", params={"query": "zanzibar", "k": 1}).json()["results"][0]["file_path"] == (
        "data/raw/repo/pkg/scheduler.py"
    )
    services = client.app.state.fastrag  # type: ignore[attr-defined]
    assert services.live.reloads == 2 and len(services.results.cache) == 2


def test_lru_cache_evicts_least_recently_used() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the oldest
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert (cache.hits, cache.misses, len(cache)) == (3, 1, 2)
    texts: LruCache[str, str] = LruCache(10, len)  # bounded by total weight (characters), not entries
    texts.put("a", "aaaa")
    texts.put("b", "bbbb")
    texts.put("c", "cccc")  # 12 > 10: "a" goes
    texts.put("huge", "x" * 11)  # heavier than the whole cache: not kept, nothing evicted
    assert texts.get("a") is None and texts.get("huge") is None and texts.weight == 8 and len(texts) == 2


def test_search_strange_unicode_is_served(client: TestClient) -> None:
    response = client.post(
        "/search",
        content=b'{"query": "caf\\u00e9 \\ud800 temperature", "k": 2}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert any(r["file_path"].endswith("sampling.py") for r in response.json()["results"])


def test_nothing_matches_is_an_empty_list(client: TestClient) -> None:
    response = client.get("/search", params={"query": "asdfghjkl", "k": 10})
    assert response.status_code == 200 and response.json()["results"] == []


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"query": "  ", "k": "3"}, "query is empty"),
        ({"k": "3"}, "query is required"),
        ({"query": "lora", "k": "0"}, "k must be between 1 and 10"),
        ({"query": "lora", "k": "11"}, "k must be between 1 and 10"),
        ({"query": "lora", "k": "abc"}, "k must be an integer"),
        ({"query": "lora", "k": "2.5"}, "k must be an integer"),
        ({"query": "lora", "mode": "fuzzy"}, "mode must be one of"),
        ({"query": "lora", "top_k": "3"}, "unknown parameter 'top_k'"),
        ({"query": "x" * 4097}, "too long"),
        ({"query": "lora", "mode": "vector"}, "has no vectors"),
    ],
)
def test_search_bad_parameters_are_400(client: TestClient, params: dict[str, str], fragment: str) -> None:
    assert_error(client.get("/search", params=params), 400, fragment)
    assert_error(client.post("/search", data=params), 400, fragment)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [({"query": "lora", "k": True}, "k must be an integer"), ({"query": ["lora"]}, "query must be text")],
)
def test_search_bad_json_types_are_400(client: TestClient, body: dict[str, Any], fragment: str) -> None:
    assert_error(client.post("/search", json=body), 400, fragment)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{", "not valid JSON"),
        (b"[1]", "must be an object"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
    ],
)
def test_search_malformed_json_is_400(client: TestClient, content: bytes, fragment: str) -> None:
    assert_error(client.post("/search", content=content, headers={"content-type": "application/json"}), 400, fragment)


def test_unsupported_content_type_is_415(client: TestClient) -> None:
    response = client.post("/search", content=b"query=lora", headers={"content-type": "text/plain"})
    assert_error(response, 415, "unsupported content type")


def test_file_upload_is_refused(client: TestClient) -> None:
    response = client.post("/search", data={"query": "lora"}, files={"upload": ("a.txt", b"hello")})
    assert 400 <= response.status_code < 500 and "error" in response.json()


def test_oversized_body_is_413_by_declared_length(client: TestClient) -> None:
    body = json.dumps({"query": "lora " * (MAX_BODY_BYTES // 5 + 10)}).encode()
    assert_error(client.post("/search", content=body, headers={"content-type": "application/json"}), 413, "too large")


def test_oversized_body_is_413_when_streamed_without_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"a" * 65536
        yield b'"}'

    response = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert_error(response, 413, "too large")


def test_unknown_route_and_method_are_json(client: TestClient) -> None:
    assert_error(client.get("/nope"), 404)
    assert_error(client.put("/search", json={"query": "x"}), 405)


def test_internal_error_is_a_generic_500(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = client_for(make_project(tmp_path))

    def broken(*_: Any) -> Any:
        raise RuntimeError("secret detail at /home/user/.ssh")

    monkeypatch.setattr(client.app.state.fastrag.results, "search", broken)  # type: ignore[attr-defined]
    response = client.get("/search", params={"query": "lora"})
    assert_error(response, 500, "internal server error")
    assert "secret" not in response.text


def test_no_index_is_503_and_health_says_why(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    client = client_for(tmp_path)
    assert_error(client.get("/search", params={"query": "lora"}), 503, "no index")
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["generation"] is None and "no index" in health["index_error"]


def test_cross_origin_writes_are_refused(client: TestClient) -> None:
    assert_error(client.post("/search", data={"query": "lora"}, headers={"origin": "http://evil.example"}), 403)
    assert client.post("/search", data={"query": "lora"}, headers={"origin": "http://testserver"}).status_code == 200
    assert client.get("/search", params={"query": "lora"}, headers={"origin": "http://evil.example"}).status_code == 200


def test_allowed_hosts_refuse_other_host_headers(project: Path) -> None:
    app = create_app(project / "data/processed", project / "data", allowed_hosts=("127.0.0.1", "localhost"))
    assert_error(TestClient(app, base_url="http://evil.example:5000").get("/healthz"), 400, "Host")
    assert TestClient(app, base_url="http://localhost:5000").get("/healthz").status_code == 200


def test_api_documents_and_accepts_the_search_modes(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    [mode] = [p for p in schema["paths"]["/search"]["get"]["parameters"] if p["name"] == "mode"]
    assert mode["schema"]["enum"] == list(MODES) and mode["schema"]["default"] == DEFAULT_MODE
    for name in MODES[:1]:  # lexical: the sample index has no vectors
        assert client.get("/search", params={"query": "lora", "mode": name}).json()["mode"] == name
    assert_error(client.get("/search", params={"query": "lora", "mode": "fuzzy"}), 400, "mode must be one of")


def test_concurrent_searches_agree_with_serial_ones(project: Path) -> None:
    """32 distinct searches at once on a fresh app (each one a cache miss) answer as one at a time."""
    queries = ["lora adapter", "sampling temperature", "install pip", "LLMEngine add_request"]
    searches = [{"query": q, "k": k} for q in queries for k in range(1, 9)]
    with client_for(project) as serial_client:
        serial = [serial_client.get("/search", params=p).json() for p in searches]
    assert sum(bool(r["results"]) for r in serial) > len(serial) // 2
    with client_for(project) as client, ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda p: client.get("/search", params=p), searches))
        health = client.get("/healthz").json()
    assert [r.headers["x-cache"] for r in responses] == ["miss"] * len(searches)  # none from the cache
    assert (health["cache_hits"], health["cache_misses"]) == (0, len(searches))
    assert [r.json() for r in responses] == serial


def test_concurrent_vector_searches_agree_with_serial_ones(tmp_path: Path) -> None:
    """Hybrid and vector searches run at once (their queries embedded together) and answer as one at a time."""
    write_repo(tmp_path / "data/raw/repo")
    params = IndexParams(max_chunk_size=2000, target_size=2000, embed="docs")
    build_index(tmp_path / "data/raw/repo", tmp_path / "data/processed", params, display_root="data/raw/repo",
                progress=False)  # fmt: skip
    queries = ["lora adapter", "install pip", "How do I install vLLM?", LORA_QUESTION, "scheduler", "   x"]
    searches = [{"query": q, "k": k, "mode": m} for q in queries for k in (2, 4) for m in ("hybrid", "vector")]
    with client_for(tmp_path) as serial_client:
        assert serial_client.get("/healthz").json()["vectors"] is True
        serial = [serial_client.get("/search", params=p).json() for p in searches]
    assert sum(bool(r["results"]) for r in serial) > len(serial) // 2
    with client_for(tmp_path) as client, ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda p: client.get("/search", params=p), searches))
    assert all(r.headers["x-cache"] == "miss" for r in responses)  # each searched, none from the cache
    assert [r.json() for r in responses] == serial


# ----------------------------------------------------------------------------- span


def test_span_returns_text_and_lines(client: TestClient, project: Path) -> None:
    text = (project / "data/raw/repo/pkg/engine.py").read_text(encoding="utf-8")
    start = text.index("def load_lora_adapter")
    span = client.get("/span", params={"path": "data/raw/repo/pkg/engine.py", "start": start, "end": len(text)})
    body = span.json()
    assert span.status_code == 200 and body["text"] == text[start:]
    assert body["first_line"] == text.count("\n", 0, start) + 1
    assert body["last_line"] == text.count("\n", 0, len(text) - 1) + 1


@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"path": "data/raw/repo/../../../etc/passwd", "start": 0, "end": 10}, 400, "'..'"),
        ({"path": "/etc/passwd", "start": 0, "end": 10}, 400, "inside data/"),
        ({"path": "data/datasets/none.json", "start": 0, "end": 10}, 404, "not a file of the index"),
        ({"path": "data/raw/repo/pkg/engine.py", "start": 5, "end": 5}, 400, "greater than start"),
        ({"path": "data/raw/repo/pkg/engine.py", "start": 0, "end": 99_999}, 400, "past the end"),
        ({"path": "data/raw/repo/pkg/engine.py", "start": -1, "end": 5}, 400, "start must be between"),
        ({"path": "data/raw/repo/pkg/engine.py", "start": 0}, 400, "end is required"),
    ],
)
def test_span_errors(client: TestClient, params: dict[str, Any], status: int, fragment: str) -> None:
    assert_error(client.get("/span", params=params), status, fragment)


# ----------------------------------------------------------------------------- paths confined to data/


@pytest.fixture()
def escapes(tmp_path: Path) -> Path:
    """A project with a dataset outside ``data/`` and symbolic links inside ``data/`` that lead to it."""
    root = make_project(tmp_path / "project")
    outside = tmp_path / "outside"
    write_repo(outside / "repo")
    (outside / "dataset_docs_x.json").write_text(json.dumps({"rag_questions": [{"question": "lora"}]}))
    datasets = root / "data/datasets"
    datasets.mkdir(parents=True)
    (datasets / "dataset_docs_link.json").symlink_to(outside / "dataset_docs_x.json")
    (root / "data/raw/elsewhere").symlink_to(outside / "repo", target_is_directory=True)
    (root / "data/out-link").symlink_to(outside, target_is_directory=True)
    return root


@pytest.mark.parametrize(
    ("route", "body", "fragment"),
    [
        ("/search_dataset", {"dataset_path": "data/../../outside/dataset_docs_x.json"}, "'..'"),
        ("/search_dataset", {"dataset_path": "/etc/passwd"}, "inside data/"),
        ("/search_dataset", {"dataset_path": "README.md"}, "inside data/"),
        ("/search_dataset", {"dataset_path": "data/datasets/dataset_docs_link.json"}, "symbolic link"),
        (
            "/search_dataset",
            {"dataset_path": "data/datasets/x.json", "save_directory": "data/out-link"},
            "symbolic link",
        ),
        ("/search_dataset", {"dataset_path": "data/datasets/x.json", "save_directory": "/tmp"}, "inside data/"),
        ("/search_dataset", {"dataset_path": "data/datasets/x\u0000.json"}, "NUL"),
        ("/index", {"repo_path": "/tmp"}, "inside data/"),
        ("/index", {"repo_path": "data/raw/elsewhere"}, "symbolic link"),
        ("/index", {"repo_path": "data/raw/repo/.."}, "'..'"),
        ("/span", {"path": "data/raw/elsewhere/pkg/engine.py", "start": 0, "end": 5}, "symbolic link"),
    ],
)
def test_path_escapes_are_400(escapes: Path, route: str, body: dict[str, Any], fragment: str) -> None:
    client = client_for(escapes)
    response = client.get(route, params=body) if route == "/span" else client.post(route, json=body)
    assert_error(response, 400, fragment)


# ----------------------------------------------------------------------------- search_dataset


def test_search_dataset_writes_results_inside_data(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    dataset = root / "data/datasets/UnansweredQuestions/dataset_docs_tiny.json"
    dataset.parent.mkdir(parents=True)
    dataset.write_text(
        json.dumps(
            {
                "rag_questions": [
                    {"question_id": "a", "question": LORA_QUESTION},
                    {"question_id": "b", "question_str": "sampling temperature"},
                ]
            }
        )
    )
    client = client_for(root)
    response = client.post("/search_dataset", data={"dataset_path": str(dataset.relative_to(root)), "k": "2"})
    body = response.json()
    assert response.status_code == 200, body
    assert body["saved_to"] == "data/output/search_results/dataset_docs_tiny.json" and body["questions"] == 2
    saved = json.loads((root / body["saved_to"]).read_text())
    assert saved["k"] == 2 and [r["question_id"] for r in saved["search_results"]] == ["a", "b"]
    assert saved["search_results"][0]["retrieved_sources"][0]["file_path"].startswith("data/raw/repo/")
    custom = client.post("/search_dataset", json={"dataset_path": str(dataset), "save_directory": "data/output/x"})
    assert custom.status_code == 200 and (root / "data/output/x/dataset_docs_tiny.json").is_file()


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({}, 400, "dataset_path is required"),
        ({"dataset_path": "data/datasets/missing.json"}, 400, "does not exist"),
        ({"dataset_path": "data/datasets/bad.json"}, 400, "not valid JSON"),
        ({"dataset_path": "data/datasets/bad.json", "k": 11}, 400, "k must be between 1 and 10"),
    ],
)
def test_search_dataset_errors(tmp_path: Path, body: dict[str, Any], status: int, fragment: str) -> None:
    root = make_project(tmp_path)
    (root / "data/datasets").mkdir()
    (root / "data/datasets/bad.json").write_text("{not json")
    assert_error(client_for(root).post("/search_dataset", json=body), status, fragment)


# ----------------------------------------------------------------------------- index


def test_index_builds_a_new_generation_and_searches_follow(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    client = client_for(root)
    before = client.get("/healthz").json()["generation"]
    again = client.post("/index", data={"repo_path": "data/raw/repo", "vectors": "none"}).json()
    assert again["up_to_date"] is True and again["files"] == len(SAMPLE_FILES)
    rebuilt = client.post("/index", json={"repo_path": "data/raw/repo", "max_chunk_size": 120, "vectors": "none"})
    body = rebuilt.json()
    assert rebuilt.status_code == 200, body
    assert body["up_to_date"] is False and body["files"] == len(SAMPLE_FILES) and body["seconds"] >= 0
    live = current_generation(root / "data/processed")
    assert live is not None and body["generation"] != before and body["generation"] == live.name
    found = client.get("/search", params={"query": "load_lora_adapter", "k": 10}).json()
    assert found["generation"] == body["generation"]
    assert all(r["last_character_index"] - r["first_character_index"] <= 120 for r in found["results"])


def test_index_default_repo_path_is_the_corpus(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    response = client_for(tmp_path).post("/index")
    assert_error(response, 400, "data/raw/vllm-0.10.1 does not exist")


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"max_chunk_size": 10}, 400, "max_chunk_size must be between 50 and 2000"),
        ({"max_chunk_size": "big"}, 400, "max_chunk_size must be an integer"),
        ({"repo_path": "data/raw/none"}, 400, "does not exist"),
        ({"vectors": "everything"}, 400, "vectors must be one of"),
        ({"index_dir": "/tmp"}, 400, "unknown parameter 'index_dir'"),
    ],
)
def test_index_errors(project: Path, body: dict[str, Any], status: int, fragment: str) -> None:
    body = {"repo_path": "data/raw/repo", **body}
    assert_error(client_for(project).post("/index", json=body), status, fragment)


def test_only_one_index_build_at_a_time(project: Path) -> None:
    client = client_for(project)
    services = client.app.state.fastrag  # type: ignore[attr-defined]
    with services.building:
        assert_error(client.post("/index", json={"repo_path": "data/raw/repo"}), 409, "already running")


def test_index_while_searching_never_mixes_generations(tmp_path: Path) -> None:
    """Searches racing a rebuild see the old or the new generation whole: every span they return is a chunk
    of the generation their response names."""
    root = make_project(tmp_path)
    client = client_for(root)
    old = current_generation(root / "data/processed")
    assert old is not None
    stop = threading.Event()
    responses: list[dict[str, Any]] = []
    failures: list[str] = []

    def searcher() -> None:
        while not stop.is_set():
            response = client.get("/search", params={"query": "lora adapter sampling install", "k": 10})
            if response.status_code != 200:
                failures.append(response.text)
            else:
                responses.append(response.json())

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        built = client.post("/index", json={"repo_path": "data/raw/repo", "max_chunk_size": 100})
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert built.status_code == 200, built.text
    assert not failures, failures[:1]
    new = built.json()["generation"]
    spans = {}
    for gen in (old.name, new):
        table = _chunks_of(root / "data/processed" / gen)
        spans[gen] = {table.span(i) for i in range(len(table))}
    assert responses and {r["generation"] for r in responses} <= {old.name, new}
    for response in responses:
        for hit in response["results"]:
            key = (hit["file_path"], hit["first_character_index"], hit["last_character_index"])
            assert key in spans[response["generation"]], (response["generation"], key)


def _chunks_of(gen: Path) -> ChunkTable:
    raw = json.loads((gen / "chunks.json").read_text())
    return ChunkTable(raw["paths"], raw["file"], raw["start"], raw["end"])


# ----------------------------------------------------------------------------- answer


def test_answer_json_with_tiny_model(client: TestClient) -> None:
    response = client.post("/answer", json={"query": LORA_QUESTION, "k": 3, "max_new_tokens": 12})
    body = response.json()
    assert response.status_code == 200, body
    assert body["question"] == LORA_QUESTION and body["answer"]
    assert body["prompt_tokens"] == 0  # the lead answers: the model is asked nothing
    assert 1 <= len(body["sources"]) <= 3
    assert body["cited"] and all(c["citation"] in body["answer"] for c in body["cited"])
    sources = {s["file_path"] for s in body["sources"]}
    assert {c["file_path"] for c in body["cited"]} <= sources
    assert client.get("/healthz").json()["model_loaded"] is True


def test_answer_streams_tokens_then_sources_then_done(client: TestClient) -> None:
    response = client.post("/answer", data={"query": LORA_QUESTION, "k": "3", "stream": "true", "max_new_tokens": "12"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    parsed = events(response.text)
    names = [name for name, _ in parsed]
    assert names[-2:] == ["sources", "done"] and names.count("sources") == 1
    pieces = [data for name, data in parsed if name == "message"]
    assert pieces and all(isinstance(p, str) for p in pieces)
    final = parsed[-2][1]
    assert final["cited"] and final["cited"][0]["citation"] in final["answer"]
    assert "".join(pieces).strip()[:3] in final["answer"]


def test_answer_k0_needs_no_model(project: Path) -> None:
    client = client_for(project, "/nonexistent/model.gguf")
    body = client.post("/answer", json={"query": "What is vLLM?", "k": 0}).json()
    assert body["answer"] == NO_SOURCES_ANSWER and body["sources"] == [] and body["cited"] == []
    streamed = events(client.post("/answer", json={"query": "What is vLLM?", "k": 0, "stream": True}).text)
    assert [name for name, _ in streamed] == ["message", "sources", "done"] and streamed[0][1] == NO_SOURCES_ANSWER
    assert client.post("/answer", json={"query": "asdfghjkl", "k": 5}).json()["answer"] == NO_SOURCES_ANSWER
    assert client.get("/healthz").json()["model_loaded"] is False


@pytest.mark.parametrize("stream", [False, True])
def test_answer_without_a_model_is_503(project: Path, stream: bool) -> None:
    client = client_for(project, "/nonexistent/model.gguf")
    response = client.post("/answer", json={"query": LORA_QUESTION, "k": 2, "stream": stream})
    assert_error(response, 503, "does not exist")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"query": "lora", "k": 11}, "k must be between 0 and 10"),
        ({"query": "lora", "stream": "maybe"}, "stream must be true or false"),
        ({"query": "lora", "max_new_tokens": 0}, "max_new_tokens must be between 1 and 1024"),
        ({"query": ""}, "query is empty"),
        ({"question": "lora"}, "unknown parameter 'question'"),
    ],
)
def test_answer_bad_parameters_are_400(client: TestClient, body: dict[str, Any], fragment: str) -> None:
    assert_error(client.post("/answer", json=body), 400, fragment)


def test_generation_is_serialised(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastrag.answering import answer as answering
    from fastrag.answering.generator import Generator
    from fastrag.answering.grounding import short_prompt

    active, peak, calls = [0], [0], [0]
    lock = threading.Lock()
    original = Generator.stream

    def counted(self: Generator, *args: Any, **kwargs: Any) -> str:
        with lock:
            active[0] += 1
            calls[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return original(self, *args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(Generator, "stream", counted)
    # every question asks the model (as when no lead answers): the lead's own answers generate nothing
    monkeypatch.setattr(answering, "answer_prompt", lambda p, render, count: short_prompt(p, render, count))
    ask = {"query": LORA_QUESTION, "k": 2, "max_new_tokens": 8}
    with ThreadPoolExecutor(max_workers=4) as pool:
        codes = list(
            pool.map(lambda i: client.post("/answer", json={**ask, "stream": i % 2 == 0}).status_code, range(4))
        )
    assert codes == [200] * 4 and peak[0] == 1 and calls[0] == 4


def test_too_many_waiting_questions_is_503(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answers_module, "MAX_PENDING", 0)
    assert_error(client.post("/answer", json={"query": LORA_QUESTION, "k": 2}), 503, "busy")


# ----------------------------------------------------------------------------- the serve command


def test_serve_bad_port_is_one_line_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--port", "70000", cwd=tmp_path)
    assert result.code == 2 and result.err_lines == ["fastrag: error: --port must be between 0 and 65535, got 70000"]


def test_serve_busy_port_is_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli("serve", "--port", str(port), cwd=tmp_path)
    assert result.code == 1 and len(result.err_lines) == 1 and "cannot listen on 127.0.0.1" in result.err
    assert "Traceback" not in result.err


def test_other_commands_never_import_fastapi(tmp_path: Path) -> None:
    make_project(tmp_path)
    code = (
        "import sys; from fastrag.cli import main; "
        "assert main(['search', 'lora adapter', '--k', '2']) == 0; "
        "assert not any(m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette') for m in sys.modules), 'imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_served_connections_have_nagle_off() -> None:
    """Accepted connections get TCP_NODELAY (without it each response waited ~40 ms for a delayed ACK)."""

    async def accepted_nodelay() -> int:
        sock = bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            flag = await asyncio.wait_for(seen, 10)
            writer.close()
        return flag

    assert asyncio.run(accepted_nodelay()) != 0


def test_corpus_linked_from_outside_data_is_trusted_once_indexed(tmp_path: Path) -> None:
    """``data/raw/<corpus>`` may be a link the operator made (as here: vLLM is unpacked in /tmp/corpus):
    the live index's own corpus is served and re-indexed, any other link out of ``data/`` is still refused."""
    root, _ = linked_project(tmp_path)
    build_index(root / "data/raw/corpus", root / "data/processed", display_root="data/raw/corpus", progress=False)
    client = client_for(root)
    assert client.get("/search", params={"query": "lora", "k": 1}).status_code == 200  # loads the index
    span = client.get("/span", params={"path": "data/raw/corpus/docs/lora.md", "start": 0, "end": 15})
    assert span.status_code == 200 and span.json()["text"] == "# LoRA adapters"
    assert client.post("/index", json={"repo_path": "data/raw/corpus"}).json()["up_to_date"] is True
    assert_error(client.post("/index", json={"repo_path": "data/raw/other"}), 400, "symbolic link")
