"""Reading question sets and results files, writing results files: every check in one place."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fastrag.arguments import replace_surrogates
from fastrag.config import MAX_K
from fastrag.errors import UserError
from fastrag.indexing.catalog import CATALOG_FILE
from fastrag.indexing.corpus import read_as_written
from fastrag.indexing.generations import CURRENT_FILE
from fastrag.indexing.storage import ensure_writable, write_bytes_atomic
from fastrag.schemas import (
    AnsweredQuestion,
    RagDataset,
    StudentSearchResults,
    StudentSearchResultsAndAnswer,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file, turning every way it can fail into one clear :class:`UserError`."""
    if not path.exists():
        raise UserError(f"{what} {path} does not exist")
    if path.is_dir():
        raise UserError(f"{what} {path} is a directory, not a JSON file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}") from exc
    if not data.strip():
        raise UserError(f"{what} {path} is empty")
    try:
        return replace_surrogates(json.loads(data))  # "\ud800" is JSON, not text UTF-8 can carry
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path} is not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {path} is not valid JSON (line {exc.lineno}, column {exc.colno})") from exc


def _validate(model: type[ModelT], raw: Any, path: Path, what: str) -> ModelT:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise UserError(f"{path} is not a {what}: {where}: {first['msg']}") from exc


def load_dataset(path: Path) -> RagDataset:
    """Load a question set; question ids must be unique."""
    dataset = _validate(RagDataset, read_json(path, "dataset"), path, "RAG dataset")
    seen: set[str] = set()
    for q in dataset.rag_questions:
        if q.question_id in seen:
            raise UserError(f"dataset {path} repeats question_id {q.question_id!r}")
        seen.add(q.question_id)
    return dataset


def ground_truth(dataset: RagDataset, path: Path) -> list[AnsweredQuestion]:
    """The questions of ``dataset`` that carry ground-truth sources (all of them, or an error)."""
    answered = [q for q in dataset.rag_questions if isinstance(q, AnsweredQuestion)]
    if not answered:
        raise UserError(f"dataset {path} has no ground-truth sources to evaluate against")
    return answered


def load_search_results(path: Path) -> StudentSearchResults:
    """Load a ``search_dataset`` (or ``answer_dataset``) output file."""
    return _validate(StudentSearchResults, read_json(path, "search results file"), path, "search results file")


def check_results(results: StudentSearchResults, truth: Sequence[AnsweredQuestion], path: Path) -> None:
    """Refuse (:class:`UserError`, naming the first problem) a results file that does not fit the dataset
    ``truth``: a declared ``k`` outside 1..10 or below a question's number of sources, a repeated or unknown
    ``question_id``, a span with a negative, reversed or past-the-end offset (the end checked against
    the file when it can be read from here)."""
    if not 1 <= results.k <= MAX_K:
        raise UserError(f"{path} declares k={results.k}: a results file has 1 to {MAX_K} sources per question")
    known = {q.question_id for q in truth}
    seen: set[str] = set()
    lengths: dict[str, int | None] = {}
    for result in results.search_results:
        qid = result.question_id
        if qid in seen:
            raise UserError(f"{path} repeats question_id {qid!r}")
        if qid not in known:
            raise UserError(f"{path} has question_id {qid!r}, which is not in the dataset")
        seen.add(qid)
        if len(result.retrieved_sources) > results.k:
            raise UserError(f"{path}: question {qid!r} has {len(result.retrieved_sources)} sources, "
                            f"more than the declared k={results.k}")  # fmt: skip
        for source in result.retrieved_sources:
            first, last = source.first_character_index, source.last_character_index
            if first < 0 or last < first:
                raise UserError(f"{path}: question {qid!r} has the span {source.file_path}:{first}-{last}, "
                                "whose offsets are negative or reversed")  # fmt: skip
            if source.file_path not in lengths:
                try:
                    lengths[source.file_path] = len(read_as_written(source.file_path))
                except OSError:
                    lengths[source.file_path] = None
            size = lengths[source.file_path]
            if size is not None and last > size:
                raise UserError(f"{path}: question {qid!r} has the span {source.file_path}:{first}-{last}, "
                                f"past the end of the file ({size} characters)")  # fmt: skip


def load_answers(path: Path) -> StudentSearchResultsAndAnswer:
    """Load an ``answer_dataset`` (or ``answer``) output file."""
    return _validate(StudentSearchResultsAndAnswer, read_json(path, "answers file"), path, "answers file")


def output_path(
    input_path: Path, save_directory: Path, kind: type[StudentSearchResults] = StudentSearchResults
) -> Path:
    """Where a results file for ``input_path`` goes: same base name, in ``save_directory``.

    Refuses a directory that is a file, one the user may not write to (found out now, before the
    work, by writing a file there), an index folder, and an output that would replace anything but a
    results file of type ``kind`` (:func:`check_replaceable`): the input, a dataset, any other file.
    """
    if save_directory.exists() and not save_directory.is_dir():
        raise UserError(f"save directory {save_directory} is a file, not a directory")
    target = save_directory / input_path.name
    if target.exists() and target.resolve() == input_path.resolve():
        raise UserError(f"refusing to overwrite the input file {input_path}")
    check_replaceable(target, kind)
    ensure_writable(save_directory, "save directory")
    return target


def check_replaceable(target: Path, kind: type[StudentSearchResults]) -> None:
    """Refuse (:class:`UserError`) to write ``target`` inside an index folder, or over an existing file
    that is not a results file of type ``kind`` (one fastrag wrote): a dataset, an index file, anything else."""
    folder = Path(os.path.abspath(target.parent))
    for place in (folder, *folder.parents):
        if (place / CURRENT_FILE).is_file() or (place / CATALOG_FILE).is_file():
            raise UserError(
                f"refusing to write {target} inside the index folder {place}: choose another save directory"
            )
    if not (target.exists() or target.is_symlink()):
        return
    if target.is_symlink() or not target.is_file():
        raise UserError(f"refusing to overwrite {target}: not a results file")
    try:
        raw = json.loads(target.read_bytes())
    except (OSError, ValueError, RecursionError):
        raw = None
    if isinstance(raw, dict) and "rag_questions" in raw:
        raise UserError(f"refusing to overwrite the dataset {target}: choose another save directory")
    try:
        kind.model_validate(raw)
    except ValidationError:
        raise UserError(f"refusing to overwrite {target}: not a {kind.__name__} file written by fastrag") from None


def write_results(target: Path, results: StudentSearchResults | StudentSearchResultsAndAnswer) -> None:
    """Write a results file atomically (both ``question`` and ``question_str`` keys)."""
    raw = results.model_dump(mode="json")
    try:
        data = json.dumps(raw, ensure_ascii=False, indent=2).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from the input: keep them as JSON escapes
        data = json.dumps(raw, ensure_ascii=True, indent=2).encode("ascii")
    try:
        write_bytes_atomic(target, data)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from exc
