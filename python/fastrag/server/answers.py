"""Answers in a long-running process: the model loaded once, generation serialised, tokens streamed.

One worker thread owns the model: it loads it on the first question and then runs one generation at a
time, so two requests never drive the pipeline together (each waits its turn in the worker's queue,
which is bounded: past :data:`MAX_PENDING` waiting questions the server answers 503). Streaming
callers get the text pieces through ``on_text`` as the model produces them, citations already
expanded to ``[path:first-last]``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastrag.answering.answer import GeneratedAnswer, generate_answer, load_models, prompt_for
from fastrag.answering.generator import Generator
from fastrag.answering.model_files import ModelChoice, choose_model, model_name, note_once
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Similarity
from fastrag.errors import UserError
from fastrag.schemas import MinimalSource
from fastrag.server.errors import ApiError
from fastrag.server.texts import RootedSpanReader, SourceTexts

#: Questions that may wait for the model at once; more get 503.
MAX_PENDING = 8


class Answerer:
    """Owns the language model of the process; see the module docstring."""

    def __init__(self, model: str | None, models_dir: Path, texts: SourceTexts) -> None:
        self.model = model
        self.models_dir = models_dir
        self.texts = texts
        self.load_seconds: float | None = None
        self._generator: Generator | None = None
        self._choice: ModelChoice | None = None
        #: The prompts' block similarity (as the CLI's answers), set up with the model on the worker thread.
        self._similarity: Similarity | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastrag-generate")
        self._pending = 0
        self._lock = threading.Lock()

    @property
    def choice(self) -> ModelChoice | None:
        """The model that answers (:func:`~fastrag.answering.model_files.choose_model`, never exporting:
        a server does not start a long download), or ``None`` when none can be had (asked again next time)."""
        if self._choice is None:
            try:
                self._choice = choose_model(self.model, self.models_dir, allow_export=False)
            except UserError:
                return None
        return self._choice

    @property
    def name(self) -> str:
        """The model that answers, or the one asked for when it cannot be had."""
        choice = self.choice
        return choice.spec.name if choice is not None else model_name(self.model)

    @property
    def note(self) -> str | None:
        """Why the model that answers is not the one asked for (the default fell back), if it is not."""
        choice = self.choice
        return choice.note if choice is not None else None

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._generator is not None

    def _submit(self, job: Callable[[], Any]) -> Future[Any]:
        with self._lock:
            if self._pending >= MAX_PENDING:
                raise ApiError(503, f"busy: {self._pending} questions are waiting for the model, try again later")
            self._pending += 1
        try:
            future = self._worker.submit(job)
        except RuntimeError as exc:  # shutting down
            with self._lock:
                self._pending -= 1
            raise ApiError(503, "the server is shutting down") from exc
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1

    def _load(self) -> Generator:
        """The model, loaded on first use (runs on the worker thread); 503 when it cannot be had."""
        if self._generator is None:
            try:
                self._choice = choose_model(self.model, self.models_dir, allow_export=False)
                note_once(self._choice.note, lambda note: print(f"fastrag: {note}", file=sys.stderr))
                self._generator, self._similarity = load_models(self._choice.spec, self.models_dir, warm_up=True)
            except UserError as exc:
                raise ApiError(503, str(exc)) from exc
            self.load_seconds = self._generator.info.seconds
        return self._generator

    def ensure_loaded(self) -> Future[Any]:
        """Load the model if needed, in turn with the generations queued before."""
        return self._submit(self._load)

    def generate(
        self,
        question: str,
        sources: Sequence[MinimalSource],
        max_new_tokens: int,
        on_text: Callable[[str], None] | None = None,
    ) -> Future[Any]:
        """Queue the answer to ``question`` from ``sources``; the future's result is a
        :class:`~fastrag.answering.answer.GeneratedAnswer`."""
        return self._submit(lambda: self._generate(question, sources, max_new_tokens, on_text))

    def _generate(
        self,
        question: str,
        sources: Sequence[MinimalSource],
        max_new_tokens: int,
        on_text: Callable[[str], None] | None,
    ) -> GeneratedAnswer:
        generator = self._load()
        reader = RootedSpanReader(self.texts)
        prompt = prompt_for(generator, question, sources, DEFAULT_PROMPT_BUDGET, reader, self._similarity)
        return generate_answer(generator, prompt, max_new_tokens, on_text)

    def close(self) -> None:
        """Stop taking questions; the one being generated finishes."""
        self._worker.shutdown(wait=False, cancel_futures=True)
