"""The CLI end to end: happy paths, and every bad input ends in one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import CliResult, run_cli


def assert_one_line_error(result: CliResult, code: int | None = None) -> None:
    """A failed run: non-zero exit (or exactly ``code``), one stderr line, no traceback."""
    assert "Traceback" not in result.err, result.err
    assert result.code != 0 if code is None else result.code == code, (result.code, result.err)
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("fastrag: error: "), result.err


def write_dataset(path: Path, questions: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rag_questions": questions}))
    return path


LORA_TRUTH = {
    "question_id": "q-lora",
    "question": "Which endpoint loads a LoRA adapter dynamically?",
    "sources": [{"file_path": "repo/docs/lora.md", "first_character_index": 0, "last_character_index": 200}],
    "answer": "/v1/load_lora_adapter",
}
SAMPLING_TRUTH = {
    "question_id": "q-sampling",
    "question_str": "Where are temperature and top_p defined?",
    "sources": [{"file_path": "repo/pkg/sampling.py", "first_character_index": 0, "last_character_index": 100}],
    "answer": "SamplingParams",
}


# ----------------------------------------------------------------------------- happy paths


def test_search_says_what_it_searched_for_when_it_respelled_a_word(indexed: Path) -> None:
    right = run_cli("search", "load lora adapter", "--k", "3", cwd=indexed)
    typed = run_cli("search", "load lora adaptre", "--k", "3", cwd=indexed)
    assert right.code == typed.code == 0, right.err + typed.err
    assert typed.out == right.out and "searched for: load lora adapter" in typed.err
    assert "searched for" not in right.err


def test_search_prints_the_lines_of_the_file_and_json_keeps_character_offsets(workdir: Path) -> None:
    """``path:first-last`` are the 1-based lines the span covers in the file; ``--json`` gives the character
    offsets ``search_dataset`` saves (the exercise's spans), beside those lines."""
    functions = [
        f'def handler_{i}(request):\n    """Handle request kind {i}."""\n    return {i}\n\n' for i in range(80)
    ]
    (workdir / "repo/pkg/handlers.py").write_text("".join(functions))
    built = run_cli("index", "--repo_path", "repo", "--max_chunk_size", "300", "--vectors", "none", cwd=workdir)
    assert built.code == 0, built.err
    query = "handler_57 request kind 57"
    shown = run_cli("search", query, "--k", "4", cwd=workdir)
    as_json = run_cli("search", query, "--k", "4", "--json", cwd=workdir)
    assert shown.code == as_json.code == 0, shown.err + as_json.err
    hits = json.loads(as_json.out)
    ranked = [line for line in shown.out.splitlines() if line[:3].strip().rstrip(".").isdigit()]
    assert len(hits) == len(ranked) == 4
    assert hits[0]["path"] == "repo/pkg/handlers.py" and hits[0]["first_line"] > 200  # mid-file, not line 1
    for row, hit in zip(ranked, hits):
        text = (workdir / hit["path"]).read_text(encoding="utf-8")
        starts = [0]
        for line in text.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        first, last = hit["first_line"], hit["last_line"]
        assert starts[first - 1] <= hit["start"] < starts[first], hit  # the span starts on its first line
        assert starts[last - 1] < hit["end"] <= starts[last], hit  # and ends on its last
        assert row.split()[1] == f"{hit['path']}:{first}-{last}", row
    best = (workdir / "repo/pkg/handlers.py").read_text().splitlines()[hits[0]["first_line"] - 1 : hits[0]["last_line"]]
    assert "def handler_57(request):" in best
    dataset = write_dataset(workdir / "sets" / "dataset_docs_one.json", [{**LORA_TRUTH, "question": query}])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), "--k", "4", cwd=workdir).code == 0
    saved = json.loads((workdir / "data/output/search_results/dataset_docs_one.json").read_text())
    spans = [(s["file_path"], s["first_character_index"], s["last_character_index"])
             for s in saved["search_results"][0]["retrieved_sources"]]  # fmt: skip
    assert spans == [(h["path"], h["start"], h["end"]) for h in hits]


def test_index_search_dataset_evaluate(indexed: Path) -> None:
    hit = run_cli("search", "Which endpoint does load_lora_adapter serve?", "--k", "3", cwd=indexed)
    assert hit.code == 0, hit.err
    assert "repo/docs/lora.md" in hit.out.splitlines()[0]

    dataset = write_dataset(indexed / "sets" / "dataset_docs_tiny.json", [LORA_TRUTH, SAMPLING_TRUTH])
    ran = run_cli("search_dataset", "--dataset_path", str(dataset), "--k", "5", cwd=indexed)
    assert ran.code == 0, ran.err
    out_file = indexed / "data/output/search_results/dataset_docs_tiny.json"
    payload = json.loads(out_file.read_text())
    assert payload["k"] == 5
    first = payload["search_results"][0]
    assert first["question"] == first["question_str"] == LORA_TRUTH["question"]
    assert payload["search_results"][1]["question"] == SAMPLING_TRUTH["question_str"]
    assert all(len(r["retrieved_sources"]) <= 5 for r in payload["search_results"])

    scored = run_cli(
        "evaluate", "--student_search_results_path", str(out_file), "--dataset_path", str(dataset), cwd=indexed
    )
    assert scored.code == 0, scored.err
    assert "recall@1: 1.000" in scored.out
    assert "missed in the first 5: 0 of 2 spans (file not retrieved: 0;" in scored.out


def test_evaluate_tells_why_each_missed_span_is_missed(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "dataset_docs_tiny.json", [LORA_TRUTH, SAMPLING_TRUTH])
    spans = [{"file_path": "repo/docs/lora.md", "first_character_index": 900, "last_character_index": 1000}]
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            {
                "k": 10,
                "search_results": [
                    {"question_id": "q-lora", "question": LORA_TRUTH["question"], "retrieved_sources": spans},
                    {"question_id": "q-sampling", "question": "Where?", "retrieved_sources": spans},
                ],
            }
        )
    )
    args = ("evaluate", "--student_search_results_path", str(results), "--dataset_path", str(dataset))
    scored = run_cli(*args, "--show_missed", cwd=tmp_path)
    assert scored.code == 0, scored.err
    assert "recall@10: 0.000" in scored.out
    assert (
        "missed in the first 5: 2 of 2 spans (file not retrieved: 1; file retrieved, span off: 1; "
        "found after the first 5: 0)" in scored.out
    )
    assert "repo/docs/lora.md:0-200  (file retrieved, span off)" in scored.out
    assert "repo/pkg/sampling.py:0-100  (file not retrieved)" in scored.out


def test_reindex_unchanged_is_up_to_date_and_change_is_seen(indexed: Path) -> None:
    again = run_cli("index", "--repo_path", "repo", cwd=indexed)
    assert again.code == 0 and "up to date" in again.out
    (indexed / "repo/pkg/new_module.py").write_text("def speculative_decoding_draft():\n    return 1\n")
    changed = run_cli("index", "--repo_path", "repo", cwd=indexed)
    assert changed.code == 0 and "1 chunked" in changed.out, changed.out
    hit = run_cli("search", "speculative decoding draft", "--k", "1", cwd=indexed)
    assert "repo/pkg/new_module.py" in hit.out


def test_gibberish_query_matches_nothing_without_error(indexed: Path) -> None:
    result = run_cli("search", "asdfghjkl", "--k", "10", cwd=indexed)
    assert result.code == 0 and result.out == ""
    assert result.err_lines == ["no match"]


@pytest.mark.parametrize(
    ("query", "path"), [("1e5", "docs/batch.md"), ("0x1F", "docs/mask.md"), ("1_000", "docs/slots.md")]
)
def test_numeric_query_is_treated_as_text(workdir: Path, query: str, path: str) -> None:
    """A query that reads as a number is searched as typed (read as a number, ``1e5`` would be ``100000.0``)."""
    (workdir / "repo/docs/batch.md").write_text("# Batches\n\nA batch holds at most 1e5 tokens.\n")
    (workdir / "repo/docs/mask.md").write_text("# Masks\n\nThe default mask is 0x1F.\n")
    (workdir / "repo/docs/slots.md").write_text("# Slots\n\nThe scheduler keeps 1_000 slots.\n")
    assert run_cli("index", "--repo_path", "repo", cwd=workdir).code == 0
    result = run_cli("search", query, "--k", "1", cwd=workdir)
    assert result.code == 0, result.err
    assert f"repo/{path}" in result.out.partition("\n")[0], (result.out, result.err)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_blank_query_is_an_error(indexed: Path, query: str) -> None:
    assert_one_line_error(run_cli("search", query, "--k", "10", cwd=indexed), code=2)


@pytest.mark.parametrize("k", ["0", "-1", "abc", "2.5", "11", "True", "1e9"])
def test_bad_k_for_search(indexed: Path, k: str) -> None:
    assert_one_line_error(run_cli("search", "lora", "--k", k, cwd=indexed), code=2)


@pytest.mark.parametrize("k", ["0", "abc", "11"])
def test_bad_k_for_search_dataset(indexed: Path, k: str) -> None:
    dataset = write_dataset(indexed / "d.json", [LORA_TRUTH])
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(dataset), "--k", k, cwd=indexed), code=2)


@pytest.mark.parametrize("size", ["0", "2001", "abc", "-5", "12.5"])
def test_bad_max_chunk_size(workdir: Path, size: str) -> None:
    assert_one_line_error(run_cli("index", "--repo_path", "repo", "--max_chunk_size", size, cwd=workdir), code=2)


def test_missing_dataset(indexed: Path) -> None:
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", "/nonexistent.json", cwd=indexed), code=1)


def test_dataset_that_is_not_json(indexed: Path) -> None:
    path = indexed / "bad.json"
    path.write_text("{not json")
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(path), cwd=indexed), code=1)


@pytest.mark.parametrize("payload", ['{"questions": []}', "[1, 2, 3]", '{"rag_questions": [{"id": 3}]}', ""])
def test_dataset_of_wrong_shape(indexed: Path, payload: str) -> None:
    path = indexed / "shape.json"
    path.write_text(payload)
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(path), cwd=indexed), code=1)


def test_dataset_with_duplicate_ids(indexed: Path) -> None:
    dataset = write_dataset(indexed / "dup.json", [LORA_TRUTH, LORA_TRUTH])
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed), code=1)


def test_dataset_path_missing_flag(indexed: Path) -> None:
    assert_one_line_error(run_cli("search_dataset", cwd=indexed), code=2)


def test_no_index_yet(workdir: Path) -> None:
    assert_one_line_error(run_cli("search", "lora", cwd=workdir), code=1)
    dataset = write_dataset(workdir / "d.json", [LORA_TRUTH])
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(dataset), cwd=workdir), code=1)


def test_corrupted_index_is_reported(indexed: Path) -> None:
    current = (indexed / "data/processed/CURRENT").read_text().strip()
    bm25 = indexed / "data/processed" / current / "bm25.bin"
    data = bytearray(bm25.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bm25.write_bytes(bytes(data))
    result = run_cli("search", "lora", cwd=indexed)
    assert_one_line_error(result, code=1)
    assert "index" in result.err


def test_truncated_chunk_table_is_reported(indexed: Path) -> None:
    current = (indexed / "data/processed/CURRENT").read_text().strip()
    table = indexed / "data/processed" / current / "chunks.json"
    table.write_text(table.read_text()[:20])
    assert_one_line_error(run_cli("search", "lora", cwd=indexed), code=1)


def test_save_directory_that_is_a_file(indexed: Path) -> None:
    dataset = write_dataset(indexed / "d.json", [LORA_TRUTH])
    blocker = indexed / "blocker"
    blocker.write_text("x")
    result = run_cli("search_dataset", "--dataset_path", str(dataset), "--save_directory", str(blocker), cwd=indexed)
    assert_one_line_error(result, code=1)
    assert blocker.read_text() == "x"


def test_output_never_overwrites_its_input(indexed: Path) -> None:
    dataset = write_dataset(indexed / "out" / "dataset_docs_x.json", [LORA_TRUTH])
    before = dataset.read_text()
    result = run_cli(
        "search_dataset", "--dataset_path", str(dataset), "--save_directory", str(dataset.parent), cwd=indexed
    )
    assert_one_line_error(result, code=1)
    assert dataset.read_text() == before


@pytest.mark.parametrize("repo", ["missing_repo", "repo/docs/lora.md"])
def test_bad_repo_path(workdir: Path, repo: str) -> None:
    assert_one_line_error(run_cli("index", "--repo_path", repo, cwd=workdir), code=1)


def test_empty_repo(workdir: Path) -> None:
    (workdir / "empty").mkdir()
    assert_one_line_error(run_cli("index", "--repo_path", "empty", cwd=workdir), code=1)


def test_failed_runs_keep_index_and_outputs(indexed: Path) -> None:
    dataset = write_dataset(indexed / "dataset_docs_keep.json", [LORA_TRUTH])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
    output = indexed / "data/output/search_results/dataset_docs_keep.json"
    saved = output.read_text()
    before = run_cli("search", "lora adapter", cwd=indexed).out

    assert run_cli("index", "--repo_path", "missing", cwd=indexed).code != 0
    assert run_cli("index", "--repo_path", "repo", "--max_chunk_size", "0", cwd=indexed).code != 0
    dataset.write_text("{broken")
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code != 0

    assert output.read_text() == saved
    assert run_cli("search", "lora adapter", cwd=indexed).out == before


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate"],
        ["evaluate", "--student_search_results_path", "/nope.json", "--dataset_path", "/nope.json"],
        ["search"],
        ["no_such_command"],
        ["search", "lora", "--no_such_flag", "1"],
    ],
)
def test_malformed_command_lines(indexed: Path, args: list[str]) -> None:
    assert_one_line_error(run_cli(*args, cwd=indexed))


def test_evaluate_against_unanswered_dataset(indexed: Path) -> None:
    dataset = write_dataset(indexed / "sets/dataset_docs_q.json", [{"question_id": "a", "question": "lora?"}])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
    results = indexed / "data/output/search_results/dataset_docs_q.json"
    result = run_cli(
        "evaluate", "--student_search_results_path", str(results), "--dataset_path", str(dataset), cwd=indexed
    )
    assert_one_line_error(result, code=1)
