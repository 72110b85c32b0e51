"""OpenVINO's compiled-model cache for one prompt at a time: a model loads in a fraction of its compile time.

Compiling the SmolLM2 IR for the CPU takes ~2.5 s of a one-question ``answer``; importing the compiled
model that OpenVINO saved the first time takes ~0.5 s. OpenVINO GenAI's default attention backend on a
CPU (PagedAttention, the continuous-batching model) compiles anew at every load even with ``CACHE_DIR``
set, so one-prompt pipelines use the stateful SDPA backend (:data:`ONE_PROMPT_BACKEND`), whose compiled
model is reused: same answers, same generation time (benches/RESULTS.md "Answer latency").

The cache of a model is a folder of its own (:func:`fastrag.answering.model_files.compiled_cache_dir`),
made by fastrag, never by hand:

- it is filled in a temporary sibling folder and renamed into place once the model has loaded, so an
  interrupted first load leaves no half-written cache behind;
- its stamp (:data:`STAMP_FILE`) records the OpenVINO version, the backend, the device, the model files it
  was compiled from and every file it holds (size and modification time, :func:`file_table`). A folder
  whose stamp does not match what is on disk now (another model, a newer OpenVINO, a blob changed or cut
  short) is never handed to OpenVINO, which imports a blob with altered weights without noticing: the model
  is compiled afresh and the folder replaced;
- when OpenVINO rejects a blob at import (say, a CPU without an instruction set the blob was compiled
  for), it compiles anew and writes into the folder; the folder no longer matches its stamp and is removed,
  so the next load rebuilds it the safe way.

OpenVINO GenAI is never imported here: callers pass the module in (:mod:`fastrag.answering.generator`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from fastrag.answering.model_files import put_in_place, staging_dir

#: Attention backend of one-prompt pipelines (``answer``, the server): the one whose compiled model is cached.
ONE_PROMPT_BACKEND = "SDPA"
#: The stamp inside a cache folder (see the module docstring).
STAMP_FILE = "fastrag-compiled.json"
#: How a load used the cache: imported from it, compiled and saved into it, or compiled without it.
CacheUse = Literal["hit", "saved", "off"]


def file_table(folder: Path, suffixes: tuple[str, ...] = ()) -> dict[str, list[int]]:
    """``{name: [size, mtime_ns]}`` of the files directly in ``folder`` (those ending with ``suffixes`` if given),
    the stamp excepted; empty when the folder cannot be read."""
    table: dict[str, list[int]] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return table
    for entry in entries:
        if entry.name == STAMP_FILE or (suffixes and not entry.name.endswith(suffixes)):
            continue
        try:
            if entry.is_file():
                stat = entry.stat()
                table[entry.name] = [stat.st_size, stat.st_mtime_ns]
        except OSError:
            continue
    return table


def expected_stamp(model_dir: Path, version: str, device: str) -> dict[str, Any]:
    """What a cache of ``model_dir`` must say it was made from (its own files left out)."""
    return {
        "openvino": version,
        "backend": ONE_PROMPT_BACKEND,
        "device": device,
        "model": file_table(model_dir, (".xml", ".bin")),
    }


def cache_matches(folder: Path, model_dir: Path, version: str, device: str) -> bool:
    """Whether ``folder`` is a complete cache of ``model_dir``, unchanged since it was made (module docstring)."""
    try:
        stamp = json.loads((folder / STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict):
        return False
    cached = stamp.pop("files", None)
    return bool(cached) and stamp == expected_stamp(model_dir, version, device) and cached == file_table(folder)


def load_one_prompt(ov_genai: Any, model_dir: Path, folder: Path | None, device: str) -> tuple[Any, CacheUse]:
    """An ``LLMPipeline`` of the IR in ``model_dir`` on the SDPA backend, through the compiled cache ``folder``.

    ``folder`` ``None`` (or one that cannot be written) loads without a cache. A ``RuntimeError`` of OpenVINO
    (an unreadable model) goes to the caller; an unmatched cache is rebuilt (module docstring).
    """
    version = str(ov_genai.__version__)
    if folder is None:
        return _pipeline(ov_genai, model_dir, device, None), "off"
    if cache_matches(folder, model_dir, version, device):
        before = file_table(folder)
        pipeline = _pipeline(ov_genai, model_dir, device, folder)
        if file_table(folder) != before:  # OpenVINO compiled anew into the folder: rebuild it next time
            shutil.rmtree(folder, ignore_errors=True)
        return pipeline, "hit"
    try:
        work = staging_dir(folder)
    except OSError:
        return _pipeline(ov_genai, model_dir, device, None), "off"
    try:
        pipeline = _pipeline(ov_genai, model_dir, device, work)
        stamp = {**expected_stamp(model_dir, version, device), "files": file_table(work)}
        if not stamp["files"]:  # nothing was written (caching unsupported here): nothing to keep
            return pipeline, "off"
        try:
            (work / STAMP_FILE).write_text(json.dumps(stamp), encoding="utf-8")
            put_in_place(work, folder)
        except OSError:  # the model is loaded: only the cache is lost
            return pipeline, "off"
        return pipeline, "saved"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pipeline(ov_genai: Any, model_dir: Path, device: str, cache: Path | None) -> Any:
    properties: dict[str, Any] = {"ATTENTION_BACKEND": ONE_PROMPT_BACKEND}
    if cache is not None:
        properties["CACHE_DIR"] = str(cache)
    return ov_genai.LLMPipeline(str(model_dir), device, **properties)
