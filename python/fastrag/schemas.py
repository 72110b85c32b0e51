"""The pydantic data models of the exercise (SPEC.md), shared by every command.

Extra fields are allowed everywhere. Some graders read the question text from
``question_str`` instead of ``question``: inputs accept either key, and every result written
carries both.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

#: A citation in an answer: ``[path:first-last]`` (groups: path, first, last).
CITATION = re.compile(r"\[([^\[\]\s:]+):(\d+)-(\d+)\]")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class MinimalSource(_Model):
    """A span of a corpus file: ``text[first_character_index:last_character_index]``."""

    file_path: str
    first_character_index: int
    last_character_index: int


class _HasQuestion(_Model):
    """Accepts ``question_str`` as an alias of ``question`` on input, writes both on output."""

    @model_validator(mode="before")
    @classmethod
    def _accept_question_str(cls, data: Any) -> Any:
        if isinstance(data, dict) and "question" not in data and "question_str" in data:
            data = {**data, "question": data["question_str"]}
        return data

    @model_serializer(mode="wrap")
    def _write_question_str(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if "question" in out:
            out["question_str"] = out["question"]
        return out


class UnansweredQuestion(_HasQuestion):
    """A question of a dataset."""

    question_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    question: str


class AnsweredQuestion(UnansweredQuestion):
    """A question with its ground-truth sources and reference answer."""

    sources: list[MinimalSource]
    answer: str


class RagDataset(_Model):
    """A question set, with or without ground truth."""

    rag_questions: list[AnsweredQuestion | UnansweredQuestion]


class MinimalSearchResults(_HasQuestion):
    """What was retrieved for one question."""

    question_id: str
    question: str
    retrieved_sources: list[MinimalSource]


class MinimalAnswer(MinimalSearchResults):
    """What was retrieved for one question, and the generated answer."""

    answer: str


class StudentSearchResults(_Model):
    """The output of ``search_dataset``."""

    search_results: list[MinimalSearchResults]
    k: int


class StudentSearchResultsAndAnswer(StudentSearchResults):
    """The output of ``answer_dataset`` and ``answer``."""

    search_results: list[MinimalAnswer]  # type: ignore[assignment]
