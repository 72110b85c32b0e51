"""Outputs go to results folders only; results files are checked against their dataset; small refusals.

``search_dataset`` (CLI and ``POST /search_dataset``) and ``answer`` never replace a dataset, an index
file or a file fastrag did not write; ``evaluate`` says what is wrong with a results file that does not
fit its dataset; an unclosed glob bracket and a repeated API parameter are errors; ``/healthz`` shows
no absolute path; ``index`` counts the files it is about to read.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli, write_repo
from fastrag.indexing import corpus
from fastrag.server import create_app
from test_cli import LORA_TRUTH, assert_one_line_error, write_dataset
from test_server import assert_error, make_project

with warnings.catch_warnings():  # Starlette suggests httpx2 for its test client; httpx is what is installed
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TRUTH = "data/datasets/AnsweredQuestions/dataset_docs_public.json"
PUBLIC = "data/datasets/UnansweredQuestions/dataset_docs_public.json"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """The sample project, indexed, with a ground-truth dataset and its question set of the same name."""
    root = make_project(tmp_path)
    span = {"file_path": "data/raw/repo/docs/lora.md", "first_character_index": 0, "last_character_index": 200}
    truth = dict(LORA_TRUTH, sources=[span])
    write_dataset(root / TRUTH, [truth])
    write_dataset(root / PUBLIC, [{"question_id": "q-lora", "question": LORA_TRUTH["question"]}])
    return root


def client(root: Path) -> TestClient:
    app = create_app(root / "data/processed", root / "data")
    return TestClient(app, base_url="http://127.0.0.1:5000", raise_server_exceptions=False)


# ----------------------------------------------------------------------------- outputs


def test_search_dataset_never_replaces_a_dataset(project: Path) -> None:
    before = (project / TRUTH).read_bytes()
    save = "data/datasets/AnsweredQuestions"  # holds a file with the dataset's name: the ground truth
    result = run_cli("search_dataset", "--dataset_path", PUBLIC, "--save_directory", save, cwd=project)
    assert_one_line_error(result, code=1)  # before the fix: exit 0, the ground truth replaced by results
    assert "refusing to overwrite the dataset" in result.err
    response = client(project).post("/search_dataset", json={"dataset_path": PUBLIC, "save_directory": save})
    assert_error(response, 400, "refusing to overwrite the dataset")  # before the fix: 200
    assert (project / TRUTH).read_bytes() == before


@pytest.mark.parametrize(
    ("save", "content", "expected"),
    [
        ("data/processed", None, "inside the index folder"),
        ("data/other", b"notes of mine, not JSON", "not a StudentSearchResults file"),
        ("data/other", b'{"search_results": "x"}', "not a StudentSearchResults file"),
    ],
)
def test_search_dataset_never_replaces_an_index_file_or_a_foreign_file(
    project: Path, save: str, content: bytes | None, expected: str
) -> None:
    target = project / save / Path(PUBLIC).name
    if content is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    before = {p: p.read_bytes() for p in (project / save).rglob("*") if p.is_file()}
    result = run_cli("search_dataset", "--dataset_path", PUBLIC, "--save_directory", save, cwd=project)
    assert_one_line_error(result, code=1)
    assert expected in result.err
    assert {p: p.read_bytes() for p in (project / save).rglob("*") if p.is_file()} == before
    response = client(project).post("/search_dataset", json={"dataset_path": PUBLIC, "save_directory": save})
    assert_error(response, 400, expected)


def test_a_results_file_fastrag_wrote_is_replaced(project: Path) -> None:
    for _ in range(2):  # the second run replaces the first one's output
        result = run_cli("search_dataset", "--dataset_path", PUBLIC, "--save_directory", "data/out", cwd=project)
        assert result.code == 0, result.err
    saved = json.loads((project / "data/out" / Path(PUBLIC).name).read_text())
    assert saved["k"] == 10 and saved["search_results"][0]["question_id"] == "q-lora"


# ----------------------------------------------------------------------------- evaluate


def results(sources: int = 3, k: int = 10, ids: tuple[str, ...] = ("q-lora",), start: int = 0, end: int = 100) -> Any:
    span = {"file_path": "data/raw/repo/docs/lora.md", "first_character_index": start, "last_character_index": end}
    return {"k": k, "search_results": [{"question_id": q, "question": "?", "retrieved_sources": [span] * sources}
                                       for q in ids]}  # fmt: skip


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (results(sources=10, k=3), "has 10 sources, more than the declared k=3"),
        (results(k=1_000_000), "declares k=1000000"),
        (results(k=0), "declares k=0"),
        (results(ids=("q-lora", "q-lora")), "repeats question_id 'q-lora'"),
        (results(ids=("q-other",)), "'q-other', which is not in the dataset"),
        (results(start=-5), "negative or reversed"),
        (results(start=50, end=10), "negative or reversed"),
        (results(end=10**12), "past the end of the file"),
    ],
)
def test_evaluate_refuses_results_that_do_not_fit_the_dataset(project: Path, content: Any, expected: str) -> None:
    path = project / "data/output/results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    result = run_cli("evaluate", "--student_search_results_path", str(path), "--dataset_path", TRUTH, cwd=project)
    assert_one_line_error(result, code=1)  # before the fix: exit 0 and a recall figure
    assert expected in result.err and result.out == ""


def test_evaluate_accepts_a_consistent_file(project: Path) -> None:
    path = project / "data/output/results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results(sources=3, k=3)))
    result = run_cli("evaluate", "--student_search_results_path", str(path), "--dataset_path", TRUTH, cwd=project)
    assert result.code == 0, result.err
    assert "recall@1: 1.000" in result.out


# ----------------------------------------------------------------------------- small refusals


def test_an_unclosed_glob_bracket_is_an_error(project: Path) -> None:
    result = run_cli("search", "lora", "--path", "[", cwd=project)
    assert_one_line_error(result, code=2)  # before the fix: "no match", exit 0
    assert "bad path glob '['" in result.err
    assert_error(client(project).get("/search", params={"query": "lora", "path": "["}), 400, "bad path glob")
    assert run_cli("search", "lora", "--path", "docs/[l]*.md", cwd=project).code == 0  # a closed class works


def test_a_repeated_api_parameter_is_an_error(project: Path) -> None:
    api = client(project)
    assert_error(api.get("/search?query=lora&k=3&k=4"), 400, "'k' is given more than once")  # before: k=4
    assert_error(api.post("/search", data={"query": "lora", "k": ["3", "4"]}), 400, "more than once")
    assert len(api.get("/search?query=lora&k=1&path=docs/**&path=pkg/**").json()["results"]) == 1


def test_healthz_shows_no_absolute_path(project: Path) -> None:
    health = client(project).get("/healthz")
    assert health.status_code == 200
    assert str(project) not in health.text, health.text  # before the fix: the models folder's absolute path
    note = health.json()["model_note"]
    assert note is None or "data/models/" in note, note


def test_index_counts_the_files_it_reads_and_shows_walking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_repo(tmp_path / "repo", {f"pkg/m{i}.py": f"X{i} = {i}\n" for i in range(70)} | {".hidden": "x"})
    result = run_cli("index", "--repo_path", "repo", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "fastrag: 70 files under repo, 70 to read" in result.err
    (tmp_path / "repo/pkg/m0.py").write_text("X0 = 'changed'\n")
    again = run_cli("index", "--repo_path", "repo", cwd=tmp_path)  # a few files to read: no line to wait for
    assert again.code == 0 and "to read" not in again.err, again.err
    seen: list[None] = []
    entries, _ = corpus.walk(tmp_path / "repo", on_file=lambda: seen.append(None))
    assert len(entries) == 70 and len(seen) == 71  # every name seen is counted, a hidden one too
