"""The ``answer`` and ``answer_dataset`` operations: sources in, grounded and cited answers out.

``answer`` retrieves, builds the prompt, streams the generated answer and saves the result as a
``StudentSearchResultsAndAnswer`` file named after the question (:func:`answer_file`) in the answers
folder beside the index (:func:`answers_folder`), written atomically. ``answer_dataset`` answers every question of a
search-results file with the sources retrieved there, in batches, and resumes after an interruption.

When no source is retrieved (``k = 0`` or nothing matched) the fixed :data:`~fastrag.answering.prompt.NO_SOURCES_ANSWER`
is returned. With ``k = 0`` the model is not even resolved; otherwise it loads while the question is searched
(the load is the larger cost of an answer, and a search that finds nothing is rare), and goes unused: even a
model that cannot load is then not an error.

Both choose the context of a prompt with the offline embedding model when it is installed
(:func:`block_similarity`): the blocks the question's words found are ordered by meaning too. ``answer``
loads that model while the language model loads (:func:`load_models`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from fastrag.answering.citations import CitationStream, cited_or_shown
from fastrag.answering.generator import Generator, LoadInfo, load_generator
from fastrag.answering.grounding import (
    GROUNDING,
    KEY_LINES,
    Grounding,
    answer_prompt,
    grounded_answer,
    grounded_prompt,
    lead_line,
)
from fastrag.answering.lead import lead_model
from fastrag.answering.model_files import ModelChoice, ModelSpec, choose_model, note_once
from fastrag.answering.prompt import (
    DEFAULT_PROMPT_BUDGET,
    NO_SOURCES_ANSWER,
    Excerpt,
    Prompt,
    Similarity,
    Source,
    SpanReader,
)
from fastrag.answering.support import Verdict
from fastrag.config import (
    DEFAULT_ANSWERS_DIR,
    DEFAULT_BATCH_SIZE,
    DEFAULT_INDEX_DIR,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MODELS_DIR,
)
from fastrag.errors import UserError
from fastrag.evaluation.datasets import check_replaceable, load_search_results, output_path, write_results
from fastrag.indexing.storage import ensure_writable, write_json_atomic
from fastrag.schemas import MinimalAnswer, MinimalSearchResults, MinimalSource, StudentSearchResultsAndAnswer

if TYPE_CHECKING:
    from fastrag.indexing.embed import Embedder

#: Words of the question and hex digits of its hash in the name of ``answer``'s file.
ANSWER_NAME_WORDS = 8
ANSWER_NAME_HASH = 10
#: Bumped whenever prompts or post-processing change, so that a resume never mixes two versions.
PROMPT_VERSION = 7
#: ``answer_dataset`` generates up to this many answers one at a time on its one-prompt pipeline; more are
#: worth loading the continuous-batching scheduler for (it compiles at every load, then runs them together).
FEW_ASKED = 4
#: Tokens of a block (heading line included) the embedding model reads to compare it with the question.
#: Blocks are at most four lines: 48 chose the same contexts as 64–256 in C3 at ~0.85× the time of 64
#: (32 lost a code question; benches/RESULTS.md "Answers").
SIMILARITY_MAX_TOKENS = 48
#: Vectors :class:`BlockSimilarity` keeps (384 floats each: ~6 MB).
VECTOR_CACHE = 4096

#: Receives answer text as it is generated (streaming).
TextSink = Callable[[str], None]
#: Receives the one line saying which model answers and why, when it is not the one asked for.
NoteSink = Callable[[str], None]
#: Where a saved answer's ``Sources:`` block (added when the model cited nothing) starts.
SOURCES_BLOCK = "\n\nSources: "


@dataclass(slots=True)
class AnswerResult:
    """One answered question: the saved answer, its sources, and how it was made.

    ``answer`` is what is saved; ``body`` is the same without the ``Sources:`` line ``answer`` may end with.
    """

    question: str
    answer: str
    sources: list[MinimalSource]
    body: str = ""
    excerpts: list[Excerpt] = field(default_factory=list)
    prompt_tokens: int = 0
    load: LoadInfo | None = None
    note: str | None = None
    saved_to: Path | None = None
    #: ``saved_to`` held an earlier answer to the same question, now replaced.
    replaced: bool = False
    seconds: float = 0.0
    #: The units of the model's text that were not shown, with the reasons.
    dropped: tuple[Verdict, ...] = ()

    @property
    def cited(self) -> list[Excerpt]:
        """The excerpts the answer cites (all the excerpts shown when it cites none by itself)."""
        return cited_or_shown(self.answer, self.excerpts)


@dataclass(slots=True)
class GeneratedAnswer:
    """A generated answer: the saved form (``answer``), without its ``Sources:`` line (``body``), what it was shown."""

    answer: str
    body: str
    excerpts: list[Excerpt] = field(default_factory=list)
    prompt_tokens: int = 0
    seconds: float = 0.0
    #: The units of the model's text that were not shown, with the reasons.
    dropped: tuple[Verdict, ...] = ()

    @property
    def cited(self) -> list[Excerpt]:
        """The excerpts the answer cites (all of them when it cites none by itself)."""
        return cited_or_shown(self.answer, self.excerpts)


def prompt_sources(spans: Sequence[MinimalSource]) -> list[Source]:
    """The spec's sources (of a results file or a search) as prompt sources."""
    return [Source(s.file_path, s.first_character_index, s.last_character_index) for s in spans]


class BlockSimilarity:
    """The question-to-block cosine of the offline embedding model (a :data:`~fastrag.answering.prompt.Similarity`).

    The model is loaded on the first call, or before it by :meth:`load`. The vectors of the last
    :data:`VECTOR_CACHE` texts (questions and blocks) are kept: the questions of a dataset, or of a server's
    users, retrieve the same spans again, and a question is compared with its blocks and its key lines.
    """

    def __init__(self, models_dir: Path) -> None:
        self._models_dir = models_dir
        self._embedder: Embedder | None = None
        self._vectors: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def load(self) -> Embedder:
        """The embedding model, loaded now if it is not yet."""
        if self._embedder is None:
            from fastrag.indexing.embed import Embedder

            self._embedder = Embedder.resolve(self._models_dir, export=False)
        return self._embedder

    def __call__(self, question: str, texts: Sequence[str]) -> list[float]:
        """The cosine of ``question`` with each of ``texts`` (each read up to :data:`SIMILARITY_MAX_TOKENS`)."""
        from fastrag.indexing.embed import MODEL_MAX_TOKENS

        query = self._embedded([question], MODEL_MAX_TOKENS)[0]  # embedded like the texts it is compared with
        return [float(c) for c in self._embedded(texts, SIMILARITY_MAX_TOKENS) @ query]

    def _embedded(self, texts: Sequence[str], max_tokens: int) -> np.ndarray:
        """The vectors of ``texts`` read up to ``max_tokens``: those not cached embedded in one call."""
        embedder = self.load()
        with self._lock:  # the server's threads share one model and one cache
            missing = list(dict.fromkeys(t for t in texts if (t, max_tokens) not in self._vectors))
            if missing:
                for text, vector in zip(missing, embedder.embed(missing, max_tokens)):
                    self._vectors[(text, max_tokens)] = vector
            out = np.stack([self._vectors[(t, max_tokens)] for t in texts]) if texts else np.zeros((0, 0))
            for text in texts:
                self._vectors.move_to_end((text, max_tokens))
            while len(self._vectors) > VECTOR_CACHE:
                self._vectors.popitem(last=False)
        return out


def block_similarity(models_dir: Path = DEFAULT_MODELS_DIR) -> Similarity | None:
    """The question-to-block cosine of the offline embedding model, or ``None`` when none is installed.

    The model is found as the index finds it (:func:`fastrag.indexing.embed.find_model`, never exported from the
    hub) and loaded on the first call (:class:`BlockSimilarity`): without it, prompts are built from the
    question's words alone.
    """
    from fastrag.indexing.embed import find_model

    if find_model(models_dir) is None:
        return None
    return BlockSimilarity(models_dir)


def load_models(
    spec: ModelSpec, models_dir: Path = DEFAULT_MODELS_DIR, warm_up: bool = False
) -> tuple[Generator, Similarity | None]:
    """The generator of ``spec`` and :func:`block_similarity`, its embedding model loaded while the generator loads.

    OpenVINO lets go of the interpreter while it loads or runs a model, so the work overlaps on two cores.
    With ``warm_up`` the generator's warm-up (:meth:`~fastrag.answering.generator.Generator.warm_up_in_background`)
    starts as soon as it is loaded: a long-lived caller (the server) pays the first inference's one-time
    cost then rather than at its first generation. A one-answer process does not: most answers generate
    nothing (:func:`~fastrag.answering.grounding.answer_prompt`), and the warm-up would take a core from
    the prompt being built. A failure of either load is raised once both are done.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastrag-load") as pool:
        loading = pool.submit(_load_warming if warm_up else load_generator, spec)
        similarity = block_similarity(models_dir)
        if isinstance(similarity, BlockSimilarity):
            similarity.load()
        return loading.result(), similarity


def _load_warming(spec: ModelSpec) -> Generator:
    generator = load_generator(spec)
    generator.warm_up_in_background()
    return generator


def prompt_for(
    generator: Generator,
    question: str,
    spans: Sequence[MinimalSource],
    budget: int,
    reader: SpanReader,
    similarity: Similarity | None = None,
    key_lines: int = KEY_LINES,
) -> Prompt:
    """The prompt for one question with the model's tokenizer and chat template: its context, key lines and
    lead, and the text the model reads (:func:`~fastrag.answering.grounding.answer_prompt`: empty when the
    lead answers, and then nothing is generated)."""
    count, render = generator.count_tokens, generator.render
    built = grounded_prompt(question, prompt_sources(spans), count, render, budget, reader, similarity, key_lines)
    return answer_prompt(built, render, count)


def generate_answer(
    generator: Generator,
    prompt: Prompt,
    max_new_tokens: int,
    on_text: TextSink | None = None,
    grounding: Grounding = GROUNDING,
) -> GeneratedAnswer:
    """Generate the answer to a built ``prompt``, streaming what is shown of it to ``on_text``.

    The answer is cleaned, grounded and cited as saved (:func:`~fastrag.answering.grounding.grounded_answer`).
    A prompt with no text (its lead answers: :func:`prompt_for`) is not generated from. Under the ``lead``
    policy its first line (the lead) is streamed before generation starts and the rest when generation
    ends: the model's text is never shown before it is checked. Under the other
    policies the model's text streams as it comes (citations expanded) and what the grounding adds after
    it comes last.
    """
    started = time.perf_counter()
    stream = CitationStream(prompt.excerpts)
    streamed: list[str] = []

    def emit(piece: str) -> None:
        if piece and on_text is not None:
            streamed.append(piece)
            on_text(piece)

    def show(text: str) -> None:
        emit(stream.feed(text))

    checked_first = grounding == "lead"
    if checked_first:
        emit(lead_line(prompt))
    sink = show if on_text is not None and not checked_first else None
    raw = generator.stream(prompt.text, max_new_tokens, sink) if prompt.text else ""  # empty: the lead answers
    if not checked_first:
        emit(stream.flush())
    done = grounded_answer(raw, prompt, grounding)
    body = done.answer.split(SOURCES_BLOCK, 1)[0]
    shown = "".join(streamed).strip()
    if on_text is not None and body != shown:  # what the grounding added (or put instead) comes last
        on_text(body[len(shown) :] if shown and body.startswith(shown) else "\n\n" + body)
    return GeneratedAnswer(
        answer=done.answer,
        body=body,
        excerpts=prompt.excerpts,
        prompt_tokens=prompt.tokens,
        seconds=time.perf_counter() - started,
        dropped=done.dropped,
    )


def answer(
    question: str,
    k: int,
    model: str | None = None,
    index_dir: Path = DEFAULT_INDEX_DIR,
    save_directory: Path | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    on_text: TextSink | None = None,
    budget: int = DEFAULT_PROMPT_BUDGET,
    on_note: NoteSink | None = None,
) -> AnswerResult:
    """Retrieve ``k`` spans for ``question``, generate a cited answer (streamed to ``on_text``), save it.

    The model is :func:`~fastrag.answering.model_files.choose_model`'s; ``on_note`` gets its note (which
    model answers and why) before the model loads.

    The result goes to ``save_directory`` (default: :func:`answers_folder` of ``index_dir``), in the
    file :func:`answer_file` names after the question, written atomically: asking the same question
    again replaces its answer (``replaced`` says so), another question never does.
    """
    started = time.perf_counter()
    save_directory = answers_folder(index_dir) if save_directory is None else save_directory
    if save_directory.exists() and not save_directory.is_dir():
        raise UserError(f"save directory {save_directory} is a file, not a directory")
    check_replaceable(save_directory / answer_file(question), StudentSearchResultsAndAnswer)
    ensure_writable(save_directory, "save directory")  # before the model loads, not after it answered
    spans: list[MinimalSource] = []
    reader = SpanReader()
    models: tuple[Generator, Similarity | None] | None = None
    if k > 0:
        from fastrag.retrieval.retriever import Retriever, hits_to_sources

        retriever = Retriever.open(index_dir)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastrag-models") as pool:
            # The models load while the question is searched; a model that cannot load only matters
            # if something was found.
            choosing = pool.submit(choose_model, model)
            loading = pool.submit(lambda: load_models(choosing.result().spec))
            spans = hits_to_sources(retriever.search(question, k))
            models = loading.result() if spans else None
        if spans:  # the note is said only when that model answers
            note_once(choosing.result().note, on_note)
        reader = SpanReader(retriever.files.text)  # as indexed, from any working directory
    result = AnswerResult(question, NO_SOURCES_ANSWER, spans, NO_SOURCES_ANSWER)
    if models is not None:  # something was found
        generator, similarity = models
        prompt = prompt_for(generator, question, spans, budget, reader, similarity)
        done = generate_answer(generator, prompt, max_new_tokens, on_text)
        result.answer, result.body, result.excerpts = done.answer, done.body, done.excerpts
        result.prompt_tokens, result.load, result.dropped = done.prompt_tokens, generator.info, done.dropped
    target = save_directory / answer_file(question)
    result.replaced = target.exists()
    record = MinimalAnswer(
        question_id=str(uuid.uuid4()), question=question, retrieved_sources=spans, answer=result.answer
    )
    write_results(target, StudentSearchResultsAndAnswer(search_results=[record], k=k))
    result.saved_to = target
    result.seconds = time.perf_counter() - started
    return result


def _generated(
    generator: Generator, spec: ModelSpec, asked: Sequence[tuple[int, Prompt]], max_new_tokens: int, batch_size: int
) -> Iterator[tuple[int, Prompt, str]]:
    """``(index, prompt, model text)`` of each of ``asked``: one at a time on ``generator`` when they are at most
    :data:`FEW_ASKED`, else by a continuous-batching scheduler of ``batch_size`` loaded for them."""
    if len(asked) <= FEW_ASKED:
        for i, prompt in asked:
            yield i, prompt, generator.stream(prompt.text, max_new_tokens)
        return
    batched = load_generator(spec, max_batch=batch_size)
    for j, text in batched.generate_iter((p.text for _, p in asked), max_new_tokens):
        yield (*asked[j], text)


def answers_folder(index_dir: Path) -> Path:
    """Where ``answer`` saves by default: beside ``index_dir``, as the answers folder is beside the
    default index (``data/output/search_results_and_answer`` for ``data/processed``)."""
    return index_dir.parent / DEFAULT_ANSWERS_DIR.relative_to(DEFAULT_INDEX_DIR.parent)


def answer_file(question: str) -> str:
    """The file name of ``answer``'s result for ``question``: its first words and a hash of all of it
    (blanks collapsed), so that two questions never share a file and the same one asked again does."""
    text = " ".join(question.split())
    words = "".join(c if c.isascii() and c.isalnum() else " " for c in text.lower()).split()[:ANSWER_NAME_WORDS]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:ANSWER_NAME_HASH]
    return "-".join(["answer", *words, digest]) + ".json"


def _chosen(model: str | None, on_note: NoteSink | None) -> ModelChoice:
    """The model that answers; its note (why it is not the one asked for) to ``on_note``, once per process."""
    choice = choose_model(model)
    note_once(choice.note, on_note)
    return choice


# ----------------------------------------------------------------------------- answer_dataset


@dataclass(slots=True)
class DatasetReport:
    """What ``answer_dataset`` did."""

    target: Path
    questions: int
    generated: int
    resumed: int
    without_sources: int
    seconds: float
    load: LoadInfo | None = None
    prompt_tokens: list[int] = field(default_factory=list)
    #: Of the ``generated`` (answered by this run), those the model was asked about (the others' leads answer).
    asked: int = 0
    #: The units of the model's text not shown, by question id (generated answers only, not resumed ones).
    dropped: dict[str, tuple[Verdict, ...]] = field(default_factory=dict)


def partial_path(target: Path) -> Path:
    """Where progress is kept while ``target`` is being produced: a hidden sibling, removed at the end.

    Hidden so that a grader globbing ``*docs*`` in the answers folder never picks up a half-done run.
    """
    return target.parent / f".{target.name}.partial"


def _fingerprint(input_bytes: bytes, model: str, max_new_tokens: int, budget: int, semantic: bool) -> str:
    """Identity of a run: same input file, model and settings, or the partial progress is not reused."""
    digest = hashlib.sha256(input_bytes)
    lead = lead_model()  # answers led by other weights are not reused
    settings = [
        model,
        max_new_tokens,
        budget,
        semantic,
        PROMPT_VERSION,
        GROUNDING,
        KEY_LINES,
        lead.weights,
        lead.budget,
    ]
    digest.update(json.dumps(settings).encode())
    return digest.hexdigest()


def _load_partial(path: Path, fingerprint: str) -> dict[str, str]:
    """Answers saved by an interrupted run with the same fingerprint (anything unreadable is ignored)."""
    try:
        data: Any = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(data, dict)
        or data.get("fingerprint") != fingerprint
        or not isinstance(data.get("answers"), dict)
    ):
        return {}
    return {str(q): a for q, a in data["answers"].items() if isinstance(a, str)}


def _check_sources(results: Sequence[MinimalSearchResults], path: Path) -> None:
    """Every source file must be readable from here (paths are relative to the project root)."""
    files = sorted({s.file_path for r in results for s in r.retrieved_sources})
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UserError(f"source {missing[0]}{more} of {path} not found: run from the project root")


def answer_dataset(
    results_path: Path,
    save_directory: Path = DEFAULT_ANSWERS_DIR,
    model: str | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    budget: int = DEFAULT_PROMPT_BUDGET,
    progress: bool = True,
    on_note: NoteSink | None = None,
) -> DatasetReport:
    """Answer every question of a search-results file with its retrieved sources; save atomically.

    The output has the input's base name in ``save_directory`` (never the input itself). A question whose
    lead answers it is answered as soon as its prompt is built (:func:`prompt_for`: nothing is generated);
    the others are then generated: one at a time when they are few (:data:`FEW_ASKED`), else up to
    ``batch_size`` at once by the continuous-batching scheduler (the next question starts as soon as one
    is answered). Every ``batch_size`` answers, and when interrupted,
    the answers so far are saved to :func:`partial_path`, so a rerun only answers the missing ones.
    """
    started = time.perf_counter()
    results = load_search_results(results_path)
    target = output_path(results_path, save_directory, StudentSearchResultsAndAnswer)
    _check_sources(results.search_results, results_path)
    partial = partial_path(target)
    similarity = block_similarity()
    # the model is chosen (and its note shown) only when some question has sources to answer from
    choice = _chosen(model, on_note) if any(r.retrieved_sources for r in results.search_results) else None
    fingerprint = _fingerprint(
        results_path.read_bytes(),
        str(choice.spec.path) if choice else "",
        max_new_tokens,
        budget,
        similarity is not None,
    )
    done = _load_partial(partial, fingerprint)
    resumed = sum(1 for r in results.search_results if r.question_id in done)
    without = 0
    for r in results.search_results:
        if not r.retrieved_sources and r.question_id not in done:
            done[r.question_id] = NO_SOURCES_ANSWER
            without += 1
    todo = [r for r in results.search_results if r.question_id not in done]
    report = DatasetReport(target, len(results.search_results), 0, resumed, without, 0.0)
    if todo and choice is not None:
        # the one-prompt pipeline: its compiled model is cached (~0.5 s against ~2 s for the scheduler's),
        # and its tokenizer builds every prompt; the scheduler is loaded only when many questions ask the model
        generator = load_generator(choice.spec)
        report.load = generator.info
        reader = SpanReader()
        asked: list[tuple[int, Prompt]] = []  # the questions the model is asked about: (index in todo, prompt)

        def answered() -> Iterator[tuple[int, Prompt, str]]:
            """``(index in todo, prompt, model text)``: first every question the lead answers, as its prompt is
            built; then those the model is asked about (:func:`_generated`)."""
            for i, r in enumerate(todo):
                prompt = prompt_for(generator, r.question, r.retrieved_sources, budget, reader, similarity)
                if prompt.text:
                    asked.append((i, prompt))
                else:
                    yield i, prompt, ""
            report.asked = len(asked)
            yield from _generated(generator, choice.spec, asked, max_new_tokens, batch_size)

        unsaved = 0
        with tqdm(total=len(results.search_results), initial=len(results.search_results) - len(todo),
                  desc="answering", unit="q", disable=not progress) as bar:  # fmt: skip
            try:
                for i, prompt, text in answered():
                    grounded = grounded_answer(text, prompt, GROUNDING)
                    done[todo[i].question_id] = grounded.answer
                    if grounded.dropped:
                        report.dropped[todo[i].question_id] = grounded.dropped
                    report.prompt_tokens.append(prompt.tokens)
                    report.generated += 1
                    unsaved += 1
                    if unsaved == batch_size:
                        write_json_atomic(partial, {"fingerprint": fingerprint, "answers": done})
                        unsaved = 0
                    bar.update(1)
            except BaseException:  # Ctrl-C or a failure: keep what was answered for the rerun
                if unsaved:
                    write_json_atomic(partial, {"fingerprint": fingerprint, "answers": done})
                raise
    answers = [
        MinimalAnswer.model_validate({**r.model_dump(mode="json"), "answer": done[r.question_id]})
        for r in results.search_results
    ]
    write_results(target, StudentSearchResultsAndAnswer(search_results=answers, k=results.k))
    partial.unlink(missing_ok=True)
    report.seconds = time.perf_counter() - started
    return report
