"""The model caches that make one ``answer`` start fast: the IR copy of a GGUF and OpenVINO's compiled model.

Both are made atomically (a temporary sibling folder renamed into place), carry a stamp, and are never
used when the stamp does not match what is on disk: the IR is then converted again from its GGUF, the
compiled model compiled again. Also the warm-up that runs while the prompt is built. All with the tiny
random Qwen3 GGUF of the session (no hub, no SmolLM2 load).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fastrag.answering.answer import load_models
from fastrag.answering.compiled import STAMP_FILE, cache_matches, file_table
from fastrag.answering.generator import Generator, load_generator
from fastrag.answering.model_files import (
    IR_FILES,
    IR_STAMP_FILE,
    SMOLLM2_IR_NAME,
    ModelSpec,
    choose_model,
    compiled_cache_dir,
    ir_matches,
    ir_stamp,
    smollm2_gguf,
    staging_dir,
)
from fastrag.answering.prompt import messages
from fastrag.config import STALE_STAGING_S

QUESTION = "Which endpoint loads a LoRA adapter dynamically?"


def _siblings(folder: Path) -> list[str]:
    """Temporary folders left beside ``folder`` (a load that wrote atomically leaves none)."""
    return sorted(p.name for p in folder.parent.glob(f".{folder.name}.*"))


def _answer(generator: Generator) -> str:
    return generator.stream(generator.render(messages(QUESTION, [])), 12)


@pytest.fixture()
def ir_dir(tiny_gguf: Path, tmp_path: Path) -> Path:
    """An IR copy of the tiny GGUF, saved by a first load as the packaged SmolLM2's is."""
    target = tmp_path / "models" / "tiny-ov"
    generator = load_generator(ModelSpec("tiny", "gguf", tiny_gguf, save_ir_to=target))
    assert generator.info.saved_ir == target
    return target


def test_first_load_of_a_gguf_saves_a_stamped_ir_atomically(ir_dir: Path, tiny_gguf: Path) -> None:
    assert ir_dir.is_dir() and all((ir_dir / f).is_file() for f in IR_FILES)
    assert not (ir_dir / tiny_gguf.name).exists()  # the GGUF was linked in to be converted, then removed
    assert ir_matches(ir_dir, tiny_gguf)
    assert _siblings(ir_dir) == []
    stamp = json.loads((ir_dir / IR_STAMP_FILE).read_text())
    assert stamp["ir"]["openvino_model.bin"] == (ir_dir / "openvino_model.bin").stat().st_size


def test_first_load_of_a_gguf_also_fills_the_compiled_cache(tiny_gguf: Path, tmp_path: Path) -> None:
    ir, cache = tmp_path / "models" / "tiny-ov", tmp_path / "models" / ".ov-cache" / "tiny-ov"
    first = load_generator(ModelSpec("tiny", "gguf", tiny_gguf, save_ir_to=ir, compiled_cache=cache))
    assert first.info.saved_ir == ir and first.info.compiled == "saved"
    second = load_generator(ModelSpec("tiny", "ir", ir, source=tiny_gguf, compiled_cache=cache))
    assert second.info.compiled == "hit" and second.info.saved_ir is None
    assert _answer(second) == _answer(first)


def test_an_ir_file_cut_short_no_longer_matches_its_gguf(ir_dir: Path, tiny_gguf: Path) -> None:
    weights = ir_dir / "openvino_model.bin"
    weights.write_bytes(weights.read_bytes()[:-16])
    assert not ir_matches(ir_dir, tiny_gguf)


def test_an_unreadable_ir_is_converted_again_from_its_gguf(ir_dir: Path, tiny_gguf: Path, tmp_path: Path) -> None:
    expected = _answer(load_generator(ModelSpec("tiny", "gguf", tiny_gguf)))
    (ir_dir / "openvino_model.xml").write_text("not a model")
    spec = ModelSpec("tiny", "ir", ir_dir, source=tiny_gguf, compiled_cache=tmp_path / "cache")
    generator = load_generator(spec)
    assert generator.info.saved_ir == ir_dir and ir_matches(ir_dir, tiny_gguf)
    assert _answer(generator) == expected


def test_compiled_cache_is_saved_atomically_then_used(ir_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models" / ".ov-cache" / ir_dir.name
    spec = ModelSpec("tiny", "ir", ir_dir, compiled_cache=cache)
    first = load_generator(spec)
    assert first.info.compiled == "saved"
    assert (cache / STAMP_FILE).is_file() and any(name.endswith(".blob") for name in file_table(cache))
    assert _siblings(cache) == []
    second = load_generator(spec)
    assert second.info.compiled == "hit"
    assert _answer(second) == _answer(first)
    assert cache_matches(cache, ir_dir, json.loads((cache / STAMP_FILE).read_text())["openvino"], "CPU")


def _blob(cache: Path) -> Path:
    return next(p for p in cache.iterdir() if p.suffix == ".blob")


@pytest.mark.parametrize("change", ["blob changed", "blob cut short", "other openvino", "model changed", "no stamp"])
def test_a_cache_that_does_not_match_is_compiled_again(ir_dir: Path, tmp_path: Path, change: str) -> None:
    cache = tmp_path / "cache" / ir_dir.name
    spec = ModelSpec("tiny", "ir", ir_dir, compiled_cache=cache)
    expected = _answer(load_generator(spec))
    blob = _blob(cache)
    size = blob.stat().st_size
    stamp_path = cache / STAMP_FILE
    stamp = json.loads(stamp_path.read_text())
    if change == "blob changed":  # same size, other bytes: OpenVINO itself would import it unnoticed
        blob.chmod(0o644)
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0xFF
        blob.write_bytes(bytes(data))
    elif change == "blob cut short":
        blob.chmod(0o644)
        blob.write_bytes(blob.read_bytes()[: size // 2])
    elif change == "other openvino":
        stamp_path.write_text(json.dumps({**stamp, "openvino": "0.0.0"}))
    elif change == "model changed":
        (ir_dir / "openvino_model.xml").touch()
        (ir_dir / "openvino_model.xml").write_text((ir_dir / "openvino_model.xml").read_text() + "\n")
    else:
        stamp_path.unlink()
    assert not cache_matches(cache, ir_dir, stamp["openvino"], "CPU")
    generator = load_generator(spec)
    assert generator.info.compiled == "saved"
    # compiled again, whole: the stamp matches every cached file (a blob's size may differ by a few bytes
    # between two compilations in one process, whatever else OpenVINO compiled before)
    assert (
        cache_matches(cache, ir_dir, stamp["openvino"], "CPU") and abs(_blob(cache).stat().st_size - size) < size // 100
    )
    assert _answer(generator) == expected
    assert _siblings(cache) == []


def test_a_cache_folder_that_cannot_be_made_only_loses_the_cache(ir_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's parent folder should be")
    generator = load_generator(ModelSpec("tiny", "ir", ir_dir, compiled_cache=blocker / "cache"))
    assert generator.info.compiled == "off"
    assert _answer(generator)


def test_packaged_smollm2_ir_gets_its_compiled_cache(tmp_path: Path) -> None:
    models = tmp_path / "models"
    ir = models / SMOLLM2_IR_NAME
    ir.mkdir(parents=True)
    for name in IR_FILES:
        (ir / name).write_text("x")
    gguf = smollm2_gguf()
    (ir / IR_STAMP_FILE).write_text(json.dumps(ir_stamp(gguf, ir)))
    spec = choose_model(None, models).spec
    assert spec.kind == "ir" and spec.path == ir and spec.source == gguf
    cache = compiled_cache_dir(ir, models)
    assert spec.compiled_cache == cache == models / ".ov-cache" / SMOLLM2_IR_NAME
    (ir / "openvino_model.bin").write_text("xy")  # an IR file changed size: the GGUF again, saving a new IR
    again = choose_model(None, models).spec
    assert again.kind == "gguf" and again.path == gguf and again.save_ir_to == ir and again.compiled_cache == cache


def test_generation_after_a_background_warm_up_is_unchanged(ir_dir: Path, tmp_path: Path) -> None:
    spec = ModelSpec("tiny", "ir", ir_dir, compiled_cache=tmp_path / "cache")
    cold = load_generator(spec)
    expected = _answer(cold)
    warm = load_generator(spec)
    warm.warm_up_in_background()
    prompt = warm.render(messages(QUESTION, []))  # the tokenizer works while the warm-up runs
    assert warm.count_tokens([prompt])[0] > 0
    assert warm.stream(prompt, 12) == expected
    warm.warm_up_in_background()
    assert warm.generate_many([prompt], 12) == [expected]


def test_load_models_loads_the_generator_and_the_embedding_model(ir_dir: Path, tmp_path: Path) -> None:
    generator, similarity = load_models(ModelSpec("tiny", "ir", ir_dir), tmp_path / "models")
    assert similarity is not None  # the packaged embedding model
    close, far = similarity("How do I install vLLM with pip?", ["Install\npip install vllm", "Sampling: top_p"])
    assert far < close
    assert _answer(generator)


def test_staging_removes_leftovers_of_a_killed_writer_only_when_stale(tmp_path: Path) -> None:
    """A process killed while writing a model folder leaves ``.NAME.xxxx`` behind (~135 MB): the next
    staging of that folder removes it once it is stale, never a younger one (a writer may be at work)."""
    target = tmp_path / "models" / "tiny-ov"
    target.parent.mkdir(parents=True)
    stale = target.parent / ".tiny-ov.killed"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "openvino_model.bin").write_bytes(b"half")
    old = time.time() - STALE_STAGING_S - 60
    os.utime(stale, (old, old))
    young = target.parent / ".tiny-ov.writing"
    young.mkdir()
    other = target.parent / ".other-ov.killed"  # another model's staging: not this folder's to judge
    other.mkdir()
    os.utime(other, (old, old))
    work = staging_dir(target)
    assert work.parent == target.parent and work.name.startswith(".tiny-ov.") and work.is_dir()
    assert not stale.exists() and young.is_dir() and other.is_dir() and not target.exists()
