"""The CLI edge-case suite (issue 7, item 1): every command against every kind of bad input.

One table, run in-process through :func:`fastrag.cli.main` (the function ``python -m
fastrag`` calls), so the whole suite takes seconds. Each case states the exit status the CLI
documents (2: a malformed argument; 1: anything else the user can fix) and must end with exactly
one ``fastrag: error:`` line on stderr. An exception escaping ``main`` — what a user would see as
a traceback — fails the case. The cases that need a real process (non-UTF-8 bytes in ``argv``,
killed runs, unreadable files) live in ``test_robustness.py`` and ``test_odd_repos.py``.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli
from fastrag.cli import Commands, main

HUGE = str(10**30)
DS = "ds/dataset_docs_edge.json"  # a valid question set, written by the fixture
RESULTS = "data/output/search_results/dataset_docs_edge.json"  # its search results

#: One saved answer (``answer_dataset``'s shape) for the cases that need a valid answers file.
ANSWERED = {"question_id": "q1", "question": "load a LoRA adapter", "retrieved_sources": [], "answer": "No sources."}

#: Files the cases point at, written into the indexed work directory.
FILES = {
    "bad/empty.json": "",
    "bad/not_json.json": "{ not json",
    "bad/list.json": "[]",
    "bad/questions_not_list.json": '{"rag_questions": 5}',
    "bad/question_without_text.json": '{"rag_questions": [{"question_id": "a"}]}',
    "bad/duplicate_ids.json": json.dumps(
        {"rag_questions": [{"question_id": "a", "question": "x"}, {"question_id": "a", "question": "y"}]}
    ),
    "bad/results_wrong_shape.json": '{"search_results": "nope"}',
    "bad/binary.json": "\x00\x01\x02\xff",
    "a_file": "not a directory",
    "answers.json": json.dumps({"search_results": [ANSWERED]}),
    "repos.txt": "repo\n",
}


@dataclass(frozen=True)
class Case:
    """A command line and the exit status it must end with."""

    args: tuple[str, ...]
    code: int


def case(code: int, *args: str) -> Case:
    return Case(args, code)


BAD_K = ["0", "-1", "1.5", "abc", HUGE, "11", "''"]
BAD_SIZE = ["0", "-5", "1.5", "abc", HUGE, "2001", "[1]"]

# fmt: off
CASES: dict[str, Case] = {
    # search: degenerate queries and every bad k
    "search empty query": case(2, "search", ""),
    "search blank query": case(2, "search", "   \t "),
    "search no query": case(2, "search"),
    "search --json neither true nor false": case(2, "search", "lora", "--json=sometimes"),
    **{f"search --k {k}": case(2, "search", "lora", "--k", k) for k in BAD_K},
    "search bad mode": case(2, "search", "lora", "--mode", "fuzzy"),
    "search missing index_dir": case(1, "search", "lora", "--index_dir", "nowhere"),
    "search index_dir is a file": case(1, "search", "lora", "--index_dir", "a_file"),
    "search unknown flag": case(2, "search", "lora", "--bogus", "1"),
    "search empty path glob": case(2, "search", "lora", "--path", "docs/**", "--path", " "),
    "search bad path glob": case(2, "search", "lora", "--path", "[z-a]"),
    "search unknown lang": case(2, "search", "lora", "--lang", "klingon"),
    "search --repo of an unsharded index": case(2, "search", "lora", "--repo", "repo"),
    "search empty repo name": case(2, "search", "lora", "--repo", "repo,"),
    # search_dataset: every kind of bad file, bad k, bad save directory
    "search_dataset no dataset flag": case(2, "search_dataset"),
    "search_dataset missing file": case(1, "search_dataset", "--dataset_path", "bad/none.json"),
    "search_dataset directory": case(1, "search_dataset", "--dataset_path", "bad"),
    **{
        f"search_dataset {name}": case(1, "search_dataset", "--dataset_path", f"bad/{name}.json")
        for name in ["empty", "not_json", "list", "questions_not_list", "question_without_text", "duplicate_ids",
                     "binary"]
    },
    **{f"search_dataset --k {k}": case(2, "search_dataset", "--dataset_path", DS, "--k", k) for k in BAD_K},
    "search_dataset save dir is a file": case(1, "search_dataset", "--dataset_path", DS, "--save_directory", "a_file"),
    "search_dataset would overwrite input": case(1, "search_dataset", "--dataset_path", DS, "--save_directory", "ds"),
    "search_dataset bad mode": case(2, "search_dataset", "--dataset_path", DS, "--mode", "x"),
    "search_dataset missing index_dir": case(1, "search_dataset", "--dataset_path", DS, "--index_dir", "nowhere"),
    "search_dataset empty path glob": case(2, "search_dataset", "--dataset_path", DS, "--path", ""),
    "search_dataset unknown lang": case(2, "search_dataset", "--dataset_path", DS, "--lang", "."),
    "search_dataset --repo of an unsharded index": case(2, "search_dataset", "--dataset_path", DS, "--repo", "repo"),
    # evaluate
    "evaluate no flags": case(2, "evaluate"),
    "evaluate --show_missed neither true nor false": case(2, "evaluate", "--student_search_results_path", RESULTS,
                                                          "--dataset_path", DS, "--show_missed=sometimes"),
    "evaluate no dataset flag": case(2, "evaluate", "--student_search_results_path", RESULTS),
    "evaluate missing results": case(1, "evaluate", "--student_search_results_path", "bad/none.json",
                                     "--dataset_path", DS),
    "evaluate results not json": case(1, "evaluate", "--student_search_results_path", "bad/not_json.json",
                                      "--dataset_path", DS),
    "evaluate results wrong shape": case(1, "evaluate", "--student_search_results_path",
                                         "bad/results_wrong_shape.json", "--dataset_path", DS),
    "evaluate dataset without answers": case(1, "evaluate", "--student_search_results_path", RESULTS,
                                             "--dataset_path", DS),
    "evaluate dataset is binary": case(1, "evaluate", "--student_search_results_path", RESULTS,
                                       "--dataset_path", "bad/binary.json"),
    # evaluate_answers
    "evaluate_answers no flags": case(2, "evaluate_answers"),
    "evaluate_answers no dataset flag": case(2, "evaluate_answers", "--answers_path", "answers.json"),
    "evaluate_answers no answers flag": case(2, "evaluate_answers", "--dataset_path", DS),
    "evaluate_answers missing answers": case(1, "evaluate_answers", "--answers_path", "bad/none.json",
                                             "--dataset_path", DS),
    "evaluate_answers answers not json": case(1, "evaluate_answers", "--answers_path", "bad/not_json.json",
                                              "--dataset_path", DS),
    "evaluate_answers search results without answers": case(1, "evaluate_answers", "--answers_path", RESULTS,
                                                            "--dataset_path", DS),
    "evaluate_answers dataset without answers": case(1, "evaluate_answers", "--answers_path", "answers.json",
                                                     "--dataset_path", DS),
    "evaluate_answers dataset is binary": case(1, "evaluate_answers", "--answers_path", "answers.json",
                                               "--dataset_path", "bad/binary.json"),
    "evaluate_answers dataset is a directory": case(1, "evaluate_answers", "--answers_path", "answers.json",
                                                    "--dataset_path", "bad"),
    # index: every bad chunk size, bad repositories, bad options
    **{f"index --max_chunk_size {s}": case(2, "index", "--repo_path", "repo", "--max_chunk_size", s) for s in BAD_SIZE},
    "index missing repo": case(1, "index", "--repo_path", "nowhere"),
    "index repo is a file": case(1, "index", "--repo_path", "a_file"),
    "index empty repo": case(1, "index", "--repo_path", "empty_repo"),
    "index bad vectors": case(2, "index", "--repo_path", "repo", "--vectors", "sometimes"),
    "index index_dir is a file": case(1, "index", "--repo_path", "repo", "--index_dir", "a_file"),
    "index missing repository list": case(1, "index", "--repos", "bad/none.txt"),
    "index empty repository list": case(1, "index", "--repos", "bad/empty.json"),
    "index --ray without --repos": case(2, "index", "--repo_path", "repo", "--ray", "local"),
    "index bad ray address": case(2, "index", "--repos", "repos.txt", "--ray", "bogus"),
    "index --no_ignore not a yes/no": case(2, "index", "--repo_path", "repo", "--no_ignore", "maybe"),
    "index --no_ignore with --repos": case(2, "index", "--repos", "repos.txt", "--no_ignore"),
    # answer: checked before any model is loaded
    "answer empty question": case(2, "answer", ""),
    "answer blank question": case(2, "answer", "\n\n"),
    **{f"answer --k {k}": case(2, "answer", "lora", "--k", k) for k in ["-1", "abc", "2.5", HUGE]},
    **{f"answer --max_new_tokens {n}": case(2, "answer", "lora", "--max_new_tokens", n) for n in ["0", "x", "5000"]},
    "answer model that does not exist": case(1, "answer", "lora", "--model", "no/such/model.gguf"),
    "answer missing index_dir": case(1, "answer", "lora", "--index_dir", "nowhere"),
    "answer save dir is a file": case(1, "answer", "lora", "--k", "0", "--save_directory", "a_file"),
    "answer --show_dropped neither true nor false": case(2, "answer", "lora", "--k", "0", "--show_dropped=sometimes"),
    # answer_dataset
    "answer_dataset no flags": case(2, "answer_dataset"),
    "answer_dataset --show_dropped neither true nor false": case(2, "answer_dataset", "--student_search_results_path",
                                                                 RESULTS, "--show_dropped=maybe"),
    "answer_dataset missing file": case(1, "answer_dataset", "--student_search_results_path", "bad/none.json"),
    "answer_dataset not json": case(1, "answer_dataset", "--student_search_results_path", "bad/not_json.json"),
    "answer_dataset wrong shape": case(1, "answer_dataset", "--student_search_results_path",
                                       "bad/results_wrong_shape.json"),
    **{
        f"answer_dataset --batch_size {n}": case(2, "answer_dataset", "--student_search_results_path", RESULTS,
                                                 "--batch_size", n)
        for n in ["0", "-2", "abc", HUGE]
    },
    "answer_dataset --max_new_tokens 0": case(2, "answer_dataset", "--student_search_results_path", RESULTS,
                                              "--max_new_tokens", "0"),
    "answer_dataset save dir is a file": case(1, "answer_dataset", "--student_search_results_path", RESULTS,
                                              "--save_directory", "a_file"),
    "answer_dataset model that does not exist": case(1, "answer_dataset", "--student_search_results_path", RESULTS,
                                                     "--model", "no/such/model.gguf"),
    # serve: refused before anything listens
    **{f"serve --port {p}": case(2, "serve", "--port", p) for p in ["-1", "65536", "abc"]},
    "serve empty host": case(2, "serve", "--host", " "),
    "serve host that cannot be bound": case(1, "serve", "--host", "256.1.1.1", "--port", "0"),
    "serve empty token": case(2, "serve", "--host", "0.0.0.0", "--token", " "),
    "serve bare token": case(2, "serve", "--host", "0.0.0.0", "--token"),
    "serve boolean token": case(2, "serve", "--host", "0.0.0.0", "--token", "false"),
    "serve empty allowed host": case(2, "serve", "--host", "0.0.0.0", "--allowed_host", "box.lan",
                                     "--allowed_host", ""),
    # mcp: refused before the server reads stdin or listens
    "mcp bad transport": case(2, "mcp", "--transport", "carrier-pigeon"),
    **{f"mcp --port {p}": case(2, "mcp", "--transport", "http", "--port", p) for p in ["-1", "65536", "abc"]},
    "mcp empty host": case(2, "mcp", "--transport", "http", "--host", " "),
    "mcp host that cannot be bound": case(1, "mcp", "--transport", "http", "--host", "256.1.1.1", "--port", "0"),
    "mcp bare token": case(2, "mcp", "--transport", "http", "--host", "0.0.0.0", "--token"),
    "mcp empty token": case(2, "mcp", "--transport", "http", "--host", "0.0.0.0", "--token="),
    "mcp token on stdio": case(2, "mcp", "--token", "s3cret"),
    "mcp empty allowed host": case(2, "mcp", "--transport", "http", "--host", "0.0.0.0", "--allowed_host", ""),
    "mcp unknown agent": case(2, "mcp", "--print_config", "notepad"),
    "mcp repo path that is a file": case(2, "mcp", "--repo_path", "a_file"),
    # symbols, exact search, the watcher
    "definitions empty name": case(2, "definitions", ""),
    "definitions --limit 0": case(2, "definitions", "Engine", "--limit", "0"),
    "definitions missing index": case(1, "definitions", "Engine", "--index_dir", "nowhere"),
    "references empty name": case(2, "references", " "),
    "references --limit abc": case(2, "references", "Engine", "--limit", "abc"),
    "references unknown language": case(2, "references", "Engine", "--lang", "klingon"),
    "references bad glob": case(2, "references", "Engine", "--path", "["),
    "references missing index": case(1, "references", "Engine", "--index_dir", "nowhere"),
    "outline path outside the index": case(2, "outline", "../elsewhere.py"),
    "outline missing index": case(1, "outline", "a.py", "--index_dir", "nowhere"),
    "index_status missing index": case(1, "index_status", "--index_dir", "nowhere"),
    "index_status index_dir is a file": case(1, "index_status", "--index_dir", "a_file"),
    "grep empty pattern": case(2, "grep", ""),
    "grep invalid regex": case(2, "grep", "x(y", "--regex"),
    "grep --limit 0": case(2, "grep", "lora", "--limit", "0"),
    "grep unknown language": case(2, "grep", "lora", "--lang", "klingon"),
    "grep bad glob": case(2, "grep", "lora", "--path", "["),
    "grep missing index": case(1, "grep", "lora", "--index_dir", "nowhere"),
    "watch missing repository": case(1, "watch", "--repo_path", "no_such_repo"),
    "watch index dir that is a file": case(1, "watch", "--repo_path", "repo", "--index_dir", "a_file"),
    "watch bad vectors": case(2, "watch", "--repo_path", "repo", "--vectors", "pictures"),
    # no such command
    "unknown command": case(2, "reindex"),
}
# fmt: on


@pytest.fixture(scope="module")
def edge_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An indexed work directory with a valid question set, its results, and the bad files above."""
    from conftest import write_repo

    root = tmp_path_factory.mktemp("edge")
    write_repo(root / "repo")
    (root / "empty_repo").mkdir()
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8", errors="surrogateescape")
    (root / DS).parent.mkdir(parents=True, exist_ok=True)
    (root / DS).write_text(json.dumps({"rag_questions": [{"question_id": "q1", "question": "load a LoRA adapter"}]}))
    assert run_cli("index", "--repo_path", "repo", cwd=root).code == 0
    assert run_cli("search_dataset", "--dataset_path", DS, cwd=root).code == 0
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``data/`` and ``ds/`` with its content: what a failed run must not touch."""
    return {str(p.relative_to(root)): p.read_bytes() for d in ("data", "ds") for p in (root / d).rglob("*")
            if p.is_file() and p.name != ".lock"}  # fmt: skip


#: Flags no value of which fails before work starts, and why.
NO_BAD_VALUE = {
    ("serve", "index_dir"): "a missing index is served as 'no index yet' (POST /index builds it)",
    ("serve", "model"): "the model is resolved on the first question, not at start",
    ("mcp", "index_dir"): "a missing index is served as 'no index yet' (the tools say so until one is built)",
    ("mcp", "model"): "the model is resolved on the first answer, not at start",
    ("mcp", "watch"): "a yes/no flag",
    ("grep", "regex"): "a yes/no flag",
    ("grep", "ignore_case"): "a yes/no flag",
}


def cli_flags() -> dict[tuple[str, str], int]:
    """Every ``(command, parameter)`` the CLI takes, with its position, read from the commands' signatures."""
    commands = inspect.getmembers(Commands, inspect.isfunction)
    return {(name, flag): i for name, fn in commands if not name.startswith("_")
            for i, flag in enumerate(list(inspect.signature(fn).parameters)[1:])}  # fmt: skip


def covered(case: Case) -> set[tuple[str, str]]:
    """The parameters a case gives a value to: its ``--flags``, and its first parameter if given by position."""
    command, *rest = case.args
    names = {(command, arg[2:].partition("=")[0]) for arg in rest if arg.startswith("--")}
    if rest and not rest[0].startswith("--"):
        names |= {flag for flag, i in cli_flags().items() if flag[0] == command and i == 0}
    return names


def test_the_suite_is_large_enough() -> None:
    """Every command of the CLI, and every parameter of each, has at least one bad-input case in the table."""
    flags = set(cli_flags())
    assert {c.args[0] for c in CASES.values()} >= {command for command, _ in flags}, "a command without a case"
    missing = flags - set().union(*map(covered, CASES.values())) - set(NO_BAD_VALUE)
    assert not missing, f"parameters without a bad-input case: {sorted(missing)}"
    assert set(NO_BAD_VALUE) <= flags  # no stale exemption


@pytest.mark.parametrize("name", list(CASES))
def test_edge_case(name: str, edge_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                   ) -> None:  # fmt: skip
    expected = CASES[name]
    monkeypatch.chdir(edge_dir)
    before = snapshot(edge_dir)
    code = main(list(expected.args))  # an exception here is the traceback a user would have seen
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == expected.code, (code, captured.err)
    assert len(lines) == 1 and lines[0].startswith("fastrag: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    assert snapshot(edge_dir) == before  # a failed run never changes the index or an output
