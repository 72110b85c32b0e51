"""``answer`` and ``answer_dataset`` end to end on the sample repository with the tiny random Qwen3 GGUF.

Every run is offline (``HF_HUB_OFFLINE=1``); failures end in one stderr line, never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import CliResult, run_cli
from fastrag.answering import answer as answering
from fastrag.answering.answer import _fingerprint, answer_dataset, answer_file, block_similarity, partial_path
from fastrag.answering.citations import citations
from fastrag.answering.generator import Generator
from fastrag.answering.model_files import model_name
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, NO_SOURCES_ANSWER, Prompt
from fastrag.lines import line_range

LORA_QUESTION = "Which endpoint loads a LoRA adapter dynamically?"
QUESTIONS = [
    {"question_id": "q-lora", "question": LORA_QUESTION},
    {"question_id": "q-top-p", "question_str": "Where are temperature and top_p defined?"},
    {"question_id": "q-install", "question": "How do I install vllm with pip?"},
    {"question_id": "q-none", "question": "asdfghjkl"},
]


def assert_one_line_error(result: CliResult, code: int) -> None:
    assert "Traceback" not in result.err, result.err
    assert result.code == code, (result.code, result.err)
    assert len(result.err_lines) == 1 and result.err_lines[0].startswith("fastrag: error: "), result.err


def search_results(workdir: Path) -> Path:
    """A ``search_dataset`` output for :data:`QUESTIONS` (k=3) in ``workdir``."""
    dataset = workdir / "sets" / "dataset_docs_tiny.json"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    dataset.write_text(json.dumps({"rag_questions": QUESTIONS}))
    ran = run_cli("search_dataset", "--dataset_path", str(dataset), "--k", "3", cwd=workdir)
    assert ran.code == 0, ran.err
    return workdir / "data/output/search_results/dataset_docs_tiny.json"


# ----------------------------------------------------------------------------- answer


def test_k0_answers_with_fixed_message_without_a_model(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTRAG_MODEL", "/nonexistent/model.gguf")  # loading anything would fail
    result = run_cli("answer", "What is vLLM?", "--k", "0", cwd=indexed)
    assert result.code == 0 and "Traceback" not in result.err, result.err
    assert NO_SOURCES_ANSWER in result.out
    saved = json.loads((indexed / "data/output/search_results_and_answer" / answer_file("What is vLLM?")).read_text())
    assert saved["k"] == 0
    only = saved["search_results"][0]
    assert only["answer"] == NO_SOURCES_ANSWER and only["retrieved_sources"] == []
    assert only["question"] == only["question_str"] == "What is vLLM?"


def test_k0_never_imports_openvino(indexed: Path) -> None:
    code = (
        "import sys; from fastrag.cli import main; "
        "assert main(['answer', 'What is vLLM?', '--k', '0']) == 0; "
        "assert not any(m.startswith('openvino') for m in sys.modules), 'openvino imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=indexed, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_nothing_retrieved_answers_without_a_model(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTRAG_MODEL", "/nonexistent/model.gguf")
    result = run_cli("answer", "asdfghjkl", "--k", "5", cwd=indexed)
    assert result.code == 0, result.err
    assert NO_SOURCES_ANSWER in result.out


def test_answer_end_to_end_with_tiny_qwen3(indexed: Path, tiny_gguf: Path) -> None:
    result = run_cli(
        "answer", LORA_QUESTION, "--k", "3",
        "--model", str(tiny_gguf), "--max_new_tokens", "16", cwd=indexed,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert "<think>" not in result.out and "</think>" not in result.out
    assert "Sources:" in result.out and "[repo/docs/lora.md:" in result.out
    saved_to = indexed / "data/output/search_results_and_answer" / answer_file(LORA_QUESTION)
    saved = json.loads(saved_to.read_text())
    record = saved["search_results"][0]
    assert saved["k"] == 3 and 1 <= len(record["retrieved_sources"]) <= 3
    assert record["question"] == record["question_str"]
    assert "[repo/" in record["answer"] and "<think>" not in record["answer"]


def test_missing_model_path_is_one_line_error(indexed: Path) -> None:
    result = run_cli("answer", "lora adapter", "--k", "2", "--model", "/nonexistent/model.gguf", cwd=indexed)
    assert_one_line_error(result, 1)
    assert "does not exist" in result.err


def test_default_model_offline_falls_back_to_smollm2_and_says_why(indexed: Path) -> None:
    """No --model, no export, no hub: the packaged SmolLM2 answers, with one stderr line naming it and why."""
    result = run_cli(
        "answer", LORA_QUESTION, "--k", "3", "--max_new_tokens", "8", cwd=indexed
    )  # fmt: skip
    assert result.code == 0, result.err
    notes = [line for line in result.err_lines if "SmolLM2" in line]
    assert len(notes) == 1 and "Qwen/Qwen3-0.6B" in notes[0] and "not exported" in notes[0], result.err
    assert "Traceback" not in result.err
    record = json.loads((indexed / "data/output/search_results_and_answer" / answer_file(LORA_QUESTION)).read_text())
    answer = record["search_results"][0]["answer"]
    cited = citations(answer)
    assert cited and all(path.startswith("repo/") and first < last for path, first, last in cited)
    # shown as lines of the file (saved as characters)
    as_lines = {(p, a, b): line_range((indexed / p).read_text(), a, b) for p, a, b in cited}
    assert any(f"[{p}:{first}-{last}]" in result.out for (p, _, _), (first, last) in as_lines.items()), result.out
    assert not any(f"[{p}:{a}-{b}]" in result.out for (p, a, b), lines in as_lines.items() if (a, b) != lines)


def test_the_model_note_is_said_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server or a dataset run answering many questions says which model answers and why once, not per answer."""
    from fastrag.answering import answer as answering
    from fastrag.answering import model_files

    monkeypatch.setattr(model_files, "_NOTED", set())
    spec = model_files.ModelSpec("smollm2", "gguf", Path("x.gguf"))
    monkeypatch.setattr(answering, "choose_model", lambda model: model_files.ModelChoice(spec, "fell back: why"))
    said: list[str] = []
    for _ in range(3):
        assert answering._chosen(None, said.append).spec == spec
    model_files.note_once("another reason", said.append)
    assert said == ["fell back: why", "another reason"]


def test_no_model_note_when_nothing_is_answered(indexed: Path) -> None:
    """Nothing found: the fixed answer, and no word of a model that did not answer."""
    result = run_cli("answer", "zqxjkv wvutsrq", "--k", "3", "--max_new_tokens", "8", cwd=indexed)
    assert result.code == 0, result.err
    assert "not exported" not in result.err and "SmolLM2" not in result.err, result.err


def test_explicit_model_that_cannot_be_had_never_falls_back(indexed: Path) -> None:
    result = run_cli("answer", "lora adapter", "--k", "2", "--model", "Qwen/Qwen3-0.6B", cwd=indexed)
    assert_one_line_error(result, 1)
    assert "smollm2" in result.err and ".gguf" in result.err and "export" in result.err
    assert "SmolLM2" not in result.err


@pytest.mark.parametrize("k", ["-1", "11", "abc", "2.5"])
def test_bad_k_for_answer(indexed: Path, k: str) -> None:
    assert_one_line_error(run_cli("answer", "lora", "--k", k, cwd=indexed), 2)


def test_blank_question(indexed: Path) -> None:
    assert_one_line_error(run_cli("answer", "  ", cwd=indexed), 2)


# ----------------------------------------------------------------------------- answer_dataset


def test_answer_dataset_cli(indexed: Path, tiny_gguf: Path) -> None:
    results = search_results(indexed)
    ran = run_cli(
        "answer_dataset", "--student_search_results_path", str(results), "--model", str(tiny_gguf),
        "--max_new_tokens", "8", "--batch_size", "2", cwd=indexed,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    out = indexed / "data/output/search_results_and_answer/dataset_docs_tiny.json"
    payload = json.loads(out.read_text())
    assert payload["k"] == 3
    rows = {r["question_id"]: r for r in payload["search_results"]}
    assert list(rows) == [q["question_id"] for q in QUESTIONS]
    assert rows["q-top-p"]["question"] == rows["q-top-p"]["question_str"] == QUESTIONS[1]["question_str"]
    assert rows["q-none"]["answer"] == NO_SOURCES_ANSWER and rows["q-none"]["retrieved_sources"] == []
    assert all(r["answer"].strip() and "<think>" not in r["answer"] for r in rows.values())
    assert not partial_path(out).exists()

    refused = run_cli(
        "answer_dataset", "--student_search_results_path", str(out), "--save_directory", str(out.parent),
        "--model", str(tiny_gguf), cwd=indexed,
    )  # fmt: skip
    assert_one_line_error(refused, 1)


def test_answer_dataset_missing_input(indexed: Path) -> None:
    result = run_cli("answer_dataset", "--student_search_results_path", "/nonexistent.json", cwd=indexed)
    assert_one_line_error(result, 1)
    assert_one_line_error(run_cli("answer_dataset", cwd=indexed), 2)


def test_answer_dataset_resumes_after_interruption(
    indexed: Path, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = search_results(indexed)
    monkeypatch.chdir(indexed)
    save = indexed / "answers"
    target = save / results.name
    original = answering.prompt_for
    built: list[str] = []

    def interrupted(generator: Generator, question: str, *args: Any, **kwargs: Any) -> Prompt:
        if len(built) == 1:  # Ctrl-C while the second answer is made, before a periodic save (batch 8)
            raise KeyboardInterrupt
        built.append(question)
        return original(generator, question, *args, **kwargs)

    monkeypatch.setattr(answering, "prompt_for", interrupted)
    with pytest.raises(KeyboardInterrupt):
        answer_dataset(results, save, str(tiny_gguf), max_new_tokens=8, batch_size=8, progress=False)
    assert not target.exists()
    partial = json.loads(partial_path(target).read_text())
    assert len(partial["answers"]) == 2 and "q-none" in partial["answers"]  # one answered, one without sources
    first = next(q for q in partial["answers"] if q != "q-none")

    def counting(generator: Generator, question: str, *args: Any, **kwargs: Any) -> Prompt:
        built.append(question)
        return original(generator, question, *args, **kwargs)

    built.clear()
    monkeypatch.setattr(answering, "prompt_for", counting)
    report = answer_dataset(results, save, str(tiny_gguf), max_new_tokens=8, batch_size=8, progress=False)
    assert len(built) == 2 and report.generated == 2 and report.resumed == 2
    payload = json.loads(target.read_text())
    assert [r["question_id"] for r in payload["search_results"]] == [q["question_id"] for q in QUESTIONS]
    kept = next(r for r in payload["search_results"] if r["question_id"] == first)
    assert kept["answer"] == partial["answers"][first]  # resumed, not generated again
    assert not partial_path(target).exists()


def test_answer_dataset_ignores_a_foreign_or_broken_partial(indexed: Path, tiny_gguf: Path) -> None:
    results = search_results(indexed)
    out_dir = indexed / "data/output/search_results_and_answer"
    out_dir.mkdir(parents=True)
    partial_path(out_dir / results.name).write_text('{"fingerprint": "other", "answers": {"q-lora": "stale"}')
    ran = run_cli(
        "answer_dataset", "--student_search_results_path", str(results), "--model", str(tiny_gguf),
        "--max_new_tokens", "4", cwd=indexed,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    rows = json.loads((out_dir / results.name).read_text())["search_results"]
    assert all(r["answer"] != "stale" for r in rows)


def test_answer_dataset_chooses_contexts_with_the_embedding_model(
    indexed: Path, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = search_results(indexed)
    monkeypatch.chdir(indexed)
    save = indexed / "answers"
    real = block_similarity()
    assert real is not None, "the packaged embedding model is installed"
    asked: list[str] = []

    def recording(question: str, texts: Sequence[str]) -> Sequence[float]:
        asked.append(question)
        return real(question, texts)

    monkeypatch.setattr("fastrag.answering.answer.block_similarity", lambda *args: recording)
    answer_dataset(results, save, str(tiny_gguf), max_new_tokens=4, progress=False)
    with_sources = [q.get("question") or q["question_str"] for q in QUESTIONS if q["question_id"] != "q-none"]
    assert sorted(set(asked)) == sorted(with_sources)

    # answers saved with the embedding model are not resumed by a run without it (nor the reverse)
    target = save / results.name
    fingerprint = _fingerprint(results.read_bytes(), model_name(str(tiny_gguf)), 4, DEFAULT_PROMPT_BUDGET, True)
    partial_path(target).write_text(json.dumps({"fingerprint": fingerprint, "answers": {"q-lora": "stale"}}))
    monkeypatch.setattr("fastrag.answering.answer.block_similarity", lambda *args: None)
    report = answer_dataset(results, save, str(tiny_gguf), max_new_tokens=4, progress=False)
    assert report.resumed == 0 and report.generated == 3
    assert all(r["answer"] != "stale" for r in json.loads(target.read_text())["search_results"])


@pytest.mark.parametrize("few", [4, 0])
def test_answer_dataset_generates_what_it_asks_alone_or_batched(
    indexed: Path, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch, few: int
) -> None:
    """Questions that ask the model (here every one, as when no lead answers) are generated one at a time when
    they are few, by the batching scheduler otherwise; either way each is answered and grounded."""
    from fastrag.answering.grounding import short_prompt

    results = search_results(indexed)
    monkeypatch.chdir(indexed)
    monkeypatch.setattr(answering, "answer_prompt", lambda p, render, count: short_prompt(p, render, count))
    monkeypatch.setattr(answering, "FEW_ASKED", few)
    batches: list[int] = []
    original = Generator.generate_iter

    def counted(self: Generator, prompts: Iterable[str], max_new_tokens: int) -> Iterator[tuple[int, str]]:
        batches.append(self._max_batch)
        yield from original(self, prompts, max_new_tokens)

    monkeypatch.setattr(Generator, "generate_iter", counted)
    report = answer_dataset(
        results, indexed / "answers", str(tiny_gguf), max_new_tokens=8, batch_size=8, progress=False
    )
    assert report.asked == 3 and report.generated == 3 and report.without_sources == 1
    assert batches == ([] if few else [8])  # alone: streamed on the one-prompt pipeline; else one batched run
    saved = json.loads((indexed / "answers" / results.name).read_text())["search_results"]
    assert all(r["answer"] for r in saved)
