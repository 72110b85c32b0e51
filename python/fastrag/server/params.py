"""Request parameters: read from a query string, a JSON object or a form, then checked.

Every endpoint accepts the same parameters however they are sent (``curl -d query=... -d k=5``, a JSON
body, or ``?query=...`` on ``GET /search``). Checks are the command line's
(:mod:`fastrag.arguments`), so ``k``, modes and texts are judged alike everywhere; an unknown
parameter is an error rather than silently ignored (``top_k=5`` must not quietly mean ``k=10``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from fastrag.arguments import MIN_CHUNK_SIZE, bool_arg, int_arg, integer_text, mode_arg, text_arg
from fastrag.config import DEFAULT_K, MAX_CHUNK_SIZE, MAX_K
from fastrag.errors import UsageError
from fastrag.server.errors import ApiError

#: Longest query or question accepted (characters).
MAX_QUERY_CHARS = 4096
#: Longest span ``GET /span`` returns (characters).
MAX_SPAN_CHARS = 100_000
#: Bound on generated tokens, as on the command line.
MAX_NEW_TOKENS = 1024
#: Default bound on generated tokens (``fastrag.answering.generator.DEFAULT_MAX_NEW_TOKENS``, without importing it).
DEFAULT_MAX_NEW_TOKENS = 80

_JSON = ("application/json",)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


async def read_params(request: Request, accepted: Collection[str]) -> dict[str, Any]:
    """The request's parameters: query string for ``GET``, JSON object or form body otherwise."""
    if request.method in ("GET", "HEAD"):
        raw: dict[str, Any] = dict(request.query_params)
    else:
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind in _JSON or kind.endswith("+json"):
            raw = _json_object(await request.body())
        elif kind in _FORMS:
            form = await request.form(max_files=0)
            raw = {}
            for key, value in form.multi_items():
                if not isinstance(value, str):
                    raise UsageError(f"{key}: file uploads are not accepted")
                raw[key] = value
        elif not await request.body():
            raw = {}
        else:
            raise ApiError(415, f"unsupported content type {kind or 'none'!r}: send JSON or a form")
    unknown = sorted(set(raw) - set(accepted))
    if unknown:
        raise UsageError(f"unknown parameter {unknown[0]!r} (accepted: {', '.join(sorted(accepted))})")
    return raw


def _json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise UsageError("the body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise UsageError(f"the JSON body must be an object, got {type(data).__name__}")
    return data


def _required(raw: Mapping[str, Any], name: str) -> Any:
    if name not in raw:
        raise UsageError(f"{name} is required")
    return raw[name]


def _int(raw: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    return int_arg(name, integer_text(raw.get(name, default)), low, high, prefix="")


@dataclass(frozen=True, slots=True)
class SearchArgs:
    """``/search``: what to look for, how many spans, which retriever."""

    query: str
    k: int
    mode: str

    FIELDS = ("query", "k", "mode")

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SearchArgs:
        """Check the parameters of a search."""
        return cls(
            text_arg("query", _required(raw, "query"), MAX_QUERY_CHARS),
            _int(raw, "k", DEFAULT_K, 1, MAX_K),
            mode_arg(raw.get("mode", "hybrid"), prefix=""),
        )


@dataclass(frozen=True, slots=True)
class AnswerArgs:
    """``/answer``: the question, how many spans to retrieve (0: none), streaming, length bound."""

    query: str
    k: int
    mode: str
    stream: bool
    max_new_tokens: int

    FIELDS = ("query", "k", "mode", "stream", "max_new_tokens")

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> AnswerArgs:
        """Check the parameters of a question."""
        return cls(
            text_arg("query", _required(raw, "query"), MAX_QUERY_CHARS),
            _int(raw, "k", DEFAULT_K, 0, MAX_K),
            mode_arg(raw.get("mode", "hybrid"), prefix=""),
            bool_arg("stream", raw.get("stream", False), prefix=""),
            _int(raw, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, 1, MAX_NEW_TOKENS),
        )


@dataclass(frozen=True, slots=True)
class IndexArgs:
    """``/index``: chunk size, the repository (inside ``data/``), which chunks get vectors."""

    max_chunk_size: int
    repo_path: Any
    vectors: str

    FIELDS = ("max_chunk_size", "repo_path", "vectors")

    @classmethod
    def parse(cls, raw: Mapping[str, Any], default_repo: str) -> IndexArgs:
        """Check the parameters of an index build (the path is confined by the caller)."""
        vectors = raw.get("vectors", "none")
        if not isinstance(vectors, str):
            raise UsageError(f"vectors must be text, got {vectors!r}")
        return cls(
            _int(raw, "max_chunk_size", MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, MAX_CHUNK_SIZE),
            raw.get("repo_path", default_repo),
            vectors,
        )


@dataclass(frozen=True, slots=True)
class SearchDatasetArgs:
    """``/search_dataset``: the dataset and output folder (inside ``data/``), spans per question, mode."""

    dataset_path: Any
    k: int
    save_directory: Any
    mode: str

    FIELDS = ("dataset_path", "k", "save_directory", "mode")

    @classmethod
    def parse(cls, raw: Mapping[str, Any], default_save: str) -> SearchDatasetArgs:
        """Check the parameters of a dataset run (paths are confined by the caller)."""
        return cls(
            _required(raw, "dataset_path"),
            _int(raw, "k", DEFAULT_K, 1, MAX_K),
            raw.get("save_directory", default_save),
            mode_arg(raw.get("mode", "hybrid"), prefix=""),
        )


@dataclass(frozen=True, slots=True)
class SpanArgs:
    """``/span``: a file of the index and a character range of it."""

    path: Any
    start: int
    end: int

    FIELDS = ("path", "start", "end")

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SpanArgs:
        """Check the parameters of a span request (the path is confined and looked up by the caller)."""
        start = int_arg("start", integer_text(_required(raw, "start")), 0, 1 << 40, prefix="")
        end = int_arg("end", integer_text(_required(raw, "end")), 0, 1 << 40, prefix="")
        if end <= start:
            raise UsageError(f"end must be greater than start, got start={start}, end={end}")
        if end - start > MAX_SPAN_CHARS:
            raise UsageError(f"span too long: {end - start} characters, at most {MAX_SPAN_CHARS}")
        return cls(_required(raw, "path"), start, end)
