"""Answers that work out of the box and say something: the default model's fallback, grounded answers
(key lines, quotes), ``evaluate_answers``' metrics, and ``search``'s snippet lines. Offline throughout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli, searched_dataset
from fastrag.answering import model_files
from fastrag.answering.grounding import QUOTE_HEADER, ground_answer, grounded_prompt, key_lines
from fastrag.answering.model_files import IR_FILES, choose_model, export_dir
from fastrag.answering.prompt import Excerpt, Source, SpanReader, build_prompt
from fastrag.errors import UserError
from fastrag.evaluation.answer_metrics import (
    answer_text,
    contains,
    degenerate,
    key_terms,
    score_answer,
    summarize,
)
from fastrag.retrieval.snippets import best_line
from fastrag.schemas import CITATION, MinimalSource

# ----------------------------------------------------------------------------- the default model


def _fake_export(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in IR_FILES:
        (folder / name).write_text("x")


def test_default_falls_back_to_smollm2_offline_and_says_why(tmp_path: Path) -> None:
    choice = choose_model(None, tmp_path / "models")
    assert choice.spec.name == "smollm2" and choice.spec.path.suffix == ".gguf"
    assert choice.note is not None and "\n" not in choice.note
    assert "SmolLM2" in choice.note and "Qwen/Qwen3-0.6B" in choice.note and "not exported" in choice.note


def test_default_is_qwen3_when_exported(tmp_path: Path) -> None:
    folder = export_dir("Qwen/Qwen3-0.6B", tmp_path / "models")
    _fake_export(folder)
    choice = choose_model(None, tmp_path / "models")
    assert choice.spec.name == "Qwen/Qwen3-0.6B" and choice.spec.path == folder and choice.note is None


def test_default_is_exported_when_the_extra_and_the_hub_are_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exported: list[str] = []

    def export(name: str, target: Path) -> None:
        exported.append(name)
        _fake_export(target)

    monkeypatch.setattr(model_files, "_export_installed", lambda: True)
    monkeypatch.setattr(model_files, "hub_reachable", lambda: True)
    monkeypatch.setattr(model_files, "export_model", export)
    choice = choose_model(None, tmp_path / "models")
    assert exported == ["Qwen/Qwen3-0.6B"] and choice.spec.name == "Qwen/Qwen3-0.6B" and choice.note is None


def test_default_without_the_export_extra_never_probes_the_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def probe() -> bool:
        raise AssertionError("the hub was probed")

    monkeypatch.setattr(model_files, "_export_installed", lambda: False)
    monkeypatch.setattr(model_files, "hub_reachable", probe)
    choice = choose_model(None, tmp_path / "models")
    assert choice.spec.name == "smollm2" and choice.note is not None and "extra" in choice.note


def test_explicit_missing_model_is_an_error_not_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError) as err:
        choose_model(str(tmp_path / "missing.gguf"), tmp_path / "models")
    assert "does not exist" in str(err.value)
    monkeypatch.setenv("FASTRAG_MODEL", "Qwen/Qwen3-0.6B")  # named in the environment: also explicit
    with pytest.raises(UserError) as err:
        choose_model(None, tmp_path / "models")
    assert "not available here" in str(err.value)


def test_explicit_model_is_used(tiny_gguf: Path, tmp_path: Path) -> None:
    choice = choose_model(str(tiny_gguf), tmp_path / "models")
    assert choice.spec.path == tiny_gguf and choice.note is None


# ----------------------------------------------------------------------------- metrics


def test_key_terms_of_a_reference() -> None:
    reference = (
        "Set `enable_prefix_caching=True` in the LLM constructor, or pass --enable-prefix-caching to "
        'vllm serve; the "auto" mode uses 0.9 of GPU memory with Ray. The end.'
    )
    terms = key_terms(reference)
    assert {"enable_prefix_caching=true", "--enable-prefix-caching", "auto", "0.9", "gpu", "ray", "llm"} <= terms
    assert {"set", "the", "end"}.isdisjoint(terms)  # sentence-initial words are not names


def test_contains_needs_word_boundaries() -> None:
    assert contains("max 4 gpus", "4") and not contains("size 4096", "4")
    assert contains("use --tp-size=2", "--tp-size") and not contains("enable_prefix_caching", "prefix")


def test_answer_text_drops_sources_block_and_citations() -> None:
    saved = "Use the flag [a/b.md:1-9].\n\nSources: [a/prefix_caching.md:0-10]"
    assert answer_text(saved) == "Use the flag ."


def test_degenerate_answers() -> None:
    assert degenerate("") == "empty" and degenerate(" [..] ") == "empty"
    assert degenerate("yes yes yes") == "repeated token"
    assert degenerate("the value is set by the value is set by the value is set by it") == "loop"
    assert degenerate("The first line is long.\nThe first line is long.") == "loop"
    assert degenerate("Set `enable_prefix_caching=True` on the engine.") is None


def test_score_of_one_answer() -> None:
    source = MinimalSource(file_path="docs/a.md", first_character_index=0, last_character_index=100)
    score = score_answer(
        "q1",
        "How do I enable prefix caching in the LLM?",
        # key terms: `enable_prefix_caching=True`, its identifier and name parts enable_prefix_caching and True,
        # `block_size` (also as an identifier: counted once), 16 → 5; the answer has the first three
        "Set `enable_prefix_caching=True` and keep `block_size` at 16.",
        "Pass `enable_prefix_caching=True`. [docs/a.md:10-20]\n\nSources: [docs/a.md:50-200] [docs/b.md:0-5]",
        [source],
    )
    assert score.key_recall == pytest.approx(3 / 5)
    assert score.words == 2 and score.degenerate is None
    assert (score.citations, score.valid_citations) == (3, 1)
    report = summarize([score])
    assert report.citation_validity == pytest.approx(1 / 3) and report.answers_citing == 1


# ----------------------------------------------------------------------------- grounding


DOC = """# Prefix caching

Automatic prefix caching reuses the KV cache of shared prompt prefixes.

Set `enable_prefix_caching=True` in the engine to turn it on.

Unrelated notes about installation drivers follow here.
"""


def _count(texts: Any) -> list[int]:
    return [len(t) // 4 + 1 for t in texts]


def _render(msgs: Any) -> str:
    return "\n".join(m["content"] for m in msgs)


def test_key_lines_are_the_best_matching_lines_with_exact_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "apc.md").write_text(DOC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    reader = SpanReader()
    excerpt = Excerpt(Source("apc.md", 0, len(DOC)), 0, len(DOC), DOC)
    [best] = key_lines("How do I turn on enable_prefix_caching?", [excerpt], reader, n=1)
    assert DOC[best.start : best.end] == best.text and "enable_prefix_caching=True" in best.text
    assert best.number == 1 and best.citation == f"[apc.md:{best.start}-{best.end}]"
    assert key_lines("zzzz qqqq", [excerpt], reader) == []


def test_grounded_prompt_puts_key_lines_first_and_policies_quote_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "apc.md").write_text(DOC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    question = "How do I enable prefix caching?"
    prompt = grounded_prompt(question, [Source("apc.md", 0, len(DOC))], _count, _render, budget=400)
    assert prompt.key_lines and prompt.text.index("Key lines:") < prompt.text.index("Question:")
    assert prompt.key_lines[0].text in prompt.text
    quoted = ground_answer("Nothing useful here.", prompt, "fallback")  # shares no key term: quotes instead
    assert quoted.startswith(QUOTE_HEADER) and "enable_prefix_caching=True" in quoted
    kept = ground_answer("Set enable_prefix_caching=True [1].", prompt, "fallback")
    assert kept.startswith("Set enable_prefix_caching=True [apc.md:")
    appended = ground_answer("Use the `enable_prefix_caching` flag.", prompt, "append")
    assert appended.startswith("Use the `enable_prefix_caching` flag.") and QUOTE_HEADER in appended
    looped = ground_answer("the cache is the cache is the cache is the cache is it", prompt, "append")
    assert looped.startswith(QUOTE_HEADER)  # a degenerate model text is left out
    for answer in (quoted, appended):  # every quoted line cites exactly the characters shown
        for m in CITATION.finditer(answer):
            start, end = int(m.group(2)), int(m.group(3))
            assert m.group(1) == "apc.md" and DOC[start:end] in answer
    plain = build_prompt(question, [Source("apc.md", 0, len(DOC))], _count, _render, budget=400)
    assert "Key lines:" not in plain.text


# ----------------------------------------------------------------------------- evaluate_answers


def test_evaluate_answers_end_to_end_with_tiny_qwen3(indexed: Path, tiny_gguf: Path) -> None:
    questions = [
        {
            "question_id": "q-lora",
            "question": "Which endpoint loads a LoRA adapter dynamically?",
            "sources": [{"file_path": "repo/docs/lora.md", "first_character_index": 0, "last_character_index": 50}],
            "answer": "POST to `/v1/load_lora_adapter` with `lora_name` and `lora_path`.",
        },
        {
            "question_id": "q-install",
            "question": "How do I install vllm with pip?",
            "sources": [{"file_path": "repo/docs/install.md", "first_character_index": 0, "last_character_index": 40}],
            "answer": "Run `pip install vllm`; a GPU with compute capability 7.0 is needed.",
        },
    ]
    dataset, results = searched_dataset(indexed, "dataset_docs_tiny", questions)
    ran = run_cli(
        "answer_dataset", "--student_search_results_path", str(results), "--model", str(tiny_gguf),
        "--max_new_tokens", "8", cwd=indexed,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    answers = indexed / "data/output/search_results_and_answer/dataset_docs_tiny.json"
    evaluated = run_cli("evaluate_answers", "--answers_path", str(answers), "--dataset_path", str(dataset), cwd=indexed)
    assert evaluated.code == 0, evaluated.err
    out = evaluated.out
    assert "2 answers scored" in out and "key-term recall:" in out and "word recall:" in out
    assert "median answer:" in out and "degenerate:" in out
    cited = sum(len(CITATION.findall(r["answer"])) for r in json.loads(answers.read_text())["search_results"])
    assert cited > 0 and f"citations: {cited}/{cited} valid (1.000)" in out  # quotes cite what was shown

    # the measure moves with the answers: the reference itself recalls everything
    perfect = json.loads(answers.read_text())
    for record, q in zip(perfect["search_results"], questions):
        record["answer"] = q["answer"]
    answers.write_text(json.dumps(perfect))
    again = run_cli("evaluate_answers", "--answers_path", str(answers), "--dataset_path", str(dataset), cwd=indexed)
    assert "key-term recall: 1.000" in again.out and "word recall: 1.000" in again.out, again.out


def test_evaluate_answers_needs_both_paths(indexed: Path) -> None:
    result = run_cli("evaluate_answers", "--answers_path", "nowhere.json", cwd=indexed)
    assert result.code != 0 and result.err_lines == [result.err_lines[0]]
    assert result.err_lines[0].startswith("fastrag: error: ")


# ----------------------------------------------------------------------------- search snippets


def test_best_line_of_a_span() -> None:
    text = "intro\n\n  Set   `enable_prefix_caching=True` here.\nother line\n"
    assert best_line(text, 0, len(text), "enable prefix caching") == "Set `enable_prefix_caching=True` here."
    assert best_line(text, 0, len(text), "zzzz") == "intro"
    assert best_line("   \n", 0, 4, "x") == ""
    assert len(best_line("word " * 100, 0, 500, "word")) <= 160


def test_search_prints_a_snippet_line_per_hit(indexed: Path) -> None:
    result = run_cli("search", "load_lora_adapter", "--k", "2", cwd=indexed)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith(" 1. repo/") and lines[1].startswith("      ") and "load_lora_adapter" in lines[1]
