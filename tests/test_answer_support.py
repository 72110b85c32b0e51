"""Every sentence an answer shows is a source's or supported by the range it cites.

Crafted model texts go through the ``lead`` grounding (:func:`fastrag.answering.grounding.grounded_answer`)
and the saved answers through the independent check (:func:`fastrag.answering.grounding.audit_answer`).
Offline throughout.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli, searched_dataset
from fastrag.answering.answer import answer_file
from fastrag.answering.grounding import (
    PROMPT_KEY_LINES,
    QUOTE_HEADER,
    Grounded,
    answer_prompt,
    audit_answer,
    grounded_answer,
    grounded_prompt,
)
from fastrag.answering.prompt import EMPTY_ANSWER, Prompt, Source, SpanReader
from fastrag.answering.support import Unit, judge, links, sentences, support, units
from fastrag.evaluation.answer_metrics import answer_text
from fastrag.indexing.corpus import read_as_written
from fastrag.schemas import CITATION

DOC = """# Automatic prefix caching

Automatic prefix caching reuses the KV cache of earlier requests that share a prefix.
Set enable_prefix_caching=True when you create the LLM to turn it on.
The API server takes the --enable-prefix-caching flag.

```python
llm = LLM(model="facebook/opt-125m", enable_prefix_caching=True)
```

See the [benchmark guide](https://docs.example.org/bench.html) for numbers.
"""
QUESTION = "How do I enable prefix caching?"


def _count(texts: Any) -> list[int]:
    return [len(t) // 4 + 1 for t in texts]


def _render(msgs: Any) -> str:
    return "\n".join(m["content"] for m in msgs)


@pytest.fixture
def prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Prompt:
    (tmp_path / "apc.md").write_text(DOC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return grounded_prompt(QUESTION, [Source("apc.md", 0, len(DOC))], _count, _render, budget=400)


def _ground(raw: str, prompt: Prompt, key_lines: int = 1) -> Grounded:
    """The ``lead`` answer with the first ``key_lines`` key lines and no lead of source units (so that the
    model's sentences add something)."""
    return grounded_answer(raw, replace(prompt, key_lines=prompt.key_lines[:key_lines], lead=""), "lead")


def _dropped(grounded: Grounded) -> dict[str, str]:
    return {v.unit.bare: str(v.reason) for v in grounded.dropped}


def test_the_answer_leads_with_whole_cited_units_and_no_blank_line(prompt: Prompt) -> None:
    done = grounded_answer("\n\n\nSet enable_prefix_caching=True [1].", prompt, "lead")
    first = done.answer.splitlines()[0]
    assert done.lead and done.answer.startswith(done.lead) and first.strip() == first
    assert CITATION.search(done.lead.split("\n\n")[0]) and not answer_text(done.lead).endswith(":")
    assert QUOTE_HEADER not in done.lead and audit_answer(done.lead, SpanReader(), QUESTION).support_rate == 1.0


def test_a_supported_sentence_is_kept_and_cited(prompt: Prompt) -> None:
    raw = "Set `enable_prefix_caching=True` when you create the LLM [1]."
    done = _ground(raw, prompt)
    kept = "Set `enable_prefix_caching=True` when you create the LLM. [apc.md:0-"
    assert kept in done.answer and not done.dropped


def test_an_uncited_supported_sentence_gets_the_citation_of_its_evidence(prompt: Prompt) -> None:
    done = _ground("Prefix caching reuses the cache of earlier requests.", prompt)
    assert "Prefix caching reuses the cache of earlier requests. [apc.md:0-" in done.answer


def test_an_invented_acronym_expansion_is_dropped(prompt: Prompt) -> None:
    raw = "A KV (Kernel Vector) cache is a Variable of Linked Loaded Memory [1]."
    done = _ground(raw, prompt)
    assert "Kernel Vector" not in done.answer
    assert list(_dropped(done).values()) == ["unsupported"]


def test_an_empty_code_block_and_the_sentence_introducing_it_are_dropped(prompt: Prompt) -> None:
    raw = "Set it when you create the LLM:\n```\n# Using the command-line\n```"
    done = _ground(raw, prompt)
    assert "```" not in done.answer and "create the LLM:" not in done.answer
    assert sorted(_dropped(done).values()) == ["empty code block", "introduces nothing"]


def test_a_code_block_from_the_sources_is_kept_with_its_citation(prompt: Prompt) -> None:
    raw = 'Create the LLM:\n```python\nllm = LLM(model="facebook/opt-125m", enable_prefix_caching=True)\n```'
    done = _ground(raw, prompt)
    assert "```python\nllm = LLM(" in done.answer and not done.dropped
    audited = audit_answer(done.answer, SpanReader())
    assert audited.units and audited.support_rate == 1.0 and audited.empty_code_blocks == 0


def test_a_link_absent_from_the_sources_is_dropped_and_one_present_kept(prompt: Prompt) -> None:
    raw = (
        "Read the [caching guide](https://vllm.example.com/caching) about the KV cache. "
        "See the [benchmark guide](https://docs.example.org/bench.html) for numbers."
    )
    done = _ground(raw, prompt)
    assert "vllm.example.com" not in done.answer and "docs.example.org/bench.html" in done.answer
    assert list(_dropped(done).values()) == ["invented link"]
    assert links("![logo](img/logo.png) and https://a.b/c.") == ["img/logo.png", "https://a.b/c"]


def test_a_truncated_last_sentence_is_dropped(prompt: Prompt) -> None:
    done = _ground("Set enable_prefix_caching=True to turn it on. Here's a step-by-", prompt)
    assert "step-by-" not in done.answer
    assert _dropped(done) == {"Here's a step-by-": "truncated"}


def test_an_unclosed_code_block_is_truncated(prompt: Prompt) -> None:
    done = _ground("```python\nllm = LLM(model=", prompt)
    assert "```" not in done.answer and list(_dropped(done).values()) == ["truncated"]


def test_a_repetition_is_dropped(prompt: Prompt) -> None:
    sentence = "Set enable_prefix_caching=True when you create the LLM."
    done = _ground(f"{sentence} {sentence}", prompt)
    assert list(_dropped(done).values()) == ["repetition"] and done.answer.count(sentence) == 1


def test_nothing_usable_without_key_lines_says_so_and_cites(prompt: Prompt) -> None:
    empty = Prompt(prompt.text, prompt.tokens, prompt.excerpts, [])
    done = _ground("Bananas are yellow.", empty)
    assert done.answer.startswith(EMPTY_ANSWER) and CITATION.search(done.answer)


def test_the_saved_answer_passes_the_independent_check(prompt: Prompt) -> None:
    raw = "\n\nSet enable_prefix_caching=True [1]. A KV (Kernel Vector) is invented. Here's a step-by-"
    done = _ground(raw, prompt)
    audited = audit_answer(done.answer, SpanReader())
    assert audited.units >= 2 and audited.support_rate == 1.0
    assert audited.invented_links == audited.truncated == audited.empty_code_blocks == 0


def test_the_independent_check_flags_what_a_saved_answer_invents(prompt: Prompt) -> None:
    bad = (
        "A KV (Kernel Vector) cache is invented [apc.md:0-90]. See [x](https://nowhere.example/x) "
        "[apc.md:0-90].\n\n```\n# nothing\n```\n[apc.md:0-90]\n\nHere's a step-by- [apc.md:0-90]\n\nNo citation here."
    )
    audited = audit_answer(bad, SpanReader())
    assert audited.units == 5 and audited.supported == 0
    assert audited.invented_links == 1 and audited.truncated == 1 and audited.empty_code_blocks == 1


def test_units_and_sentences() -> None:
    assert sentences("One thing [a.md:1-2]. Two `x`. three") == ["One thing [a.md:1-2].", "Two `x`. three"]
    found = units("Intro:\n- item one\n```\ncode\n```\n## Heading\n```\nopen")
    assert [u.text for u in found][:2] == ["Intro:", "item one"] and found[2].code and found[-1].unclosed
    assert support("", "anything") == 0.0 and support("reuse the cache", "cache reuse") == 1.0
    assert judge(Unit("- a quoted row"), "- a quoted row", whole_line=True).reason is None
    assert judge(Unit("an unfinished row"), "an unfinished row").reason == "truncated"


# ----------------------------------------------------------------------------- end to end


LORA_QUESTION = "Which endpoint loads a LoRA adapter dynamically?"


def _check_saved(indexed: Path, answer: str) -> None:
    """The saved answer leads with a cited source unit (a sentence, or a code block cited on the line after
    it) and passes the independent check."""
    first = answer.split("\n\n")[0]
    assert first.strip() and first == first.strip() and CITATION.search(first), answer
    path, start, end = CITATION.findall(first)[0]
    quoted = (indexed / path).read_text(encoding="utf-8")[int(start) : int(end)]
    assert " ".join(quoted.split()) in " ".join(first.split())  # quoted word for word, blanks aside
    reader = SpanReader(lambda path: read_as_written(str(indexed / path)))
    audited = audit_answer(answer, reader)
    assert audited.units and audited.support_rate == 1.0, (audited, answer)
    assert audited.invented_links == audited.truncated == audited.empty_code_blocks == 0


@pytest.mark.parametrize("model", ["tiny-qwen3", "smollm2"])
def test_answer_end_to_end_shows_only_supported_sentences(indexed: Path, tiny_gguf: Path, model: str) -> None:
    """The tiny random Qwen3 (text that no source supports) and the packaged SmolLM2 go through one check."""
    name = str(tiny_gguf) if model == "tiny-qwen3" else model
    result = run_cli(
        "answer", LORA_QUESTION, "--k", "3", "--model", name, "--max_new_tokens", "24", "--show_dropped", cwd=indexed
    )  # fmt: skip
    assert result.code == 0 and "Traceback" not in result.err, result.err
    first = result.out.split("\n\n")[0]
    assert not first.startswith("#") and CITATION.search(first), result.out  # a cited source unit, not a heading
    saved = indexed / "data/output/search_results_and_answer" / answer_file(LORA_QUESTION)
    answer = json.loads(saved.read_text())["search_results"][0]["answer"]
    _check_saved(indexed, answer)
    # the question's lead answers it: the model is asked nothing, and no sentence of its is shown or dropped
    assert "nothing asked: the lead answers" in result.err, result.err
    assert "sentences of the model's text not shown" not in result.err, result.err


def test_a_prompt_without_lead_is_generated_and_its_random_text_dropped(
    prompt: Prompt, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is asked only when no lead answers; then its text goes through the check (the tiny random
    Qwen3's text is supported by nothing, so every unit of it is dropped and the key lines are quoted)."""
    from fastrag.answering.answer import generate_answer
    from fastrag.answering.generator import load_generator
    from fastrag.answering.model_files import resolve_model

    generator = load_generator(resolve_model(str(tiny_gguf)))
    asked = answer_prompt(replace(prompt, lead=""), generator.render, generator.count_tokens)
    assert asked.text and asked.tokens > 0 and "Question: " + QUESTION in asked.text
    assert all(k.text in asked.text for k in prompt.key_lines[:PROMPT_KEY_LINES])
    assert DOC.splitlines()[-1] not in asked.text  # the context beyond the key lines is not asked about
    streamed: list[str] = []
    original = generator.stream

    def spy(text: str, max_new_tokens: int, on_text: Any = None) -> str:
        streamed.append(text)
        return original(text, max_new_tokens, on_text)

    monkeypatch.setattr(generator, "stream", spy)
    shown: list[str] = []
    done = generate_answer(generator, asked, 24, shown.append)
    assert streamed == [asked.text] and done.prompt_tokens == asked.tokens
    # whatever the random model said, only the quoted key lines are shown
    assert done.body.startswith(QUOTE_HEADER) and "".join(shown).strip() == done.body


def test_a_prompt_with_a_lead_is_not_generated(prompt: Prompt) -> None:
    """A lead answers: the model's prompt is empty, and :func:`generate_answer` never calls the model."""
    from fastrag.answering.answer import generate_answer

    assert prompt.lead
    skipped = answer_prompt(prompt, _render, _count)
    assert skipped.text == "" and skipped.tokens == 0
    assert (skipped.lead, skipped.key_lines, skipped.excerpts) == (prompt.lead, prompt.key_lines, prompt.excerpts)

    class Unused:
        def stream(self, *args: Any) -> str:
            raise AssertionError("the model was asked")

    done = generate_answer(Unused(), skipped, 24)  # type: ignore[arg-type]
    assert done.answer.startswith(prompt.lead) and not done.dropped
    no_sources = answer_prompt(replace(prompt, excerpts=[], lead=""), _render, _count)
    assert no_sources.text == ""


def test_answer_dataset_and_evaluate_answers_report_support(indexed: Path, tiny_gguf: Path) -> None:
    questions = [
        {"question_id": "q-lora", "question": LORA_QUESTION, "answer": "POST to `/v1/load_lora_adapter`.",
         "sources": [{"file_path": "repo/docs/lora.md", "first_character_index": 0, "last_character_index": 50}]},
        {"question_id": "q-pip", "question": "How do I install vllm with pip?", "answer": "Run `pip install vllm`.",
         "sources": [{"file_path": "repo/docs/install.md", "first_character_index": 0, "last_character_index": 40}]},
    ]  # fmt: skip
    dataset, results = searched_dataset(indexed, "dataset_docs_support", questions)
    ran = run_cli(
        "answer_dataset", "--student_search_results_path", str(results), "--model", str(tiny_gguf),
        "--max_new_tokens", "16", "--show_dropped", cwd=indexed,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    # both leads answer: nothing is generated, nothing of the model's is dropped
    assert "(2 answered, 0 of them with the model's text" in ran.out and "not shown" not in ran.err, ran.err
    answers = indexed / "data/output/search_results_and_answer/dataset_docs_support.json"
    for record in json.loads(answers.read_text())["search_results"]:
        _check_saved(indexed, record["answer"])
    evaluated = run_cli("evaluate_answers", "--answers_path", str(answers), "--dataset_path", str(dataset), cwd=indexed)
    assert evaluated.code == 0, evaluated.err
    assert "(1.000)  invented links: 0 (0 answers)  truncated sentences: 0 (0 answers)" in evaluated.out, evaluated.out
