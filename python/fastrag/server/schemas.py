"""The API's requests and responses: one set of pydantic models, parsed by FastAPI and shown in ``/openapi.json``.

Every endpoint accepts its parameters however they are sent (``curl -d query=... -d k=5``, a JSON body,
or ``?query=...`` on ``GET /search``): :func:`parsed` is the FastAPI dependency that reads them
(:func:`read_params`) and validates them with the request's model. The models check their fields with
the command line's rules (:mod:`fastrag.arguments`, bounds taken from each ``Field``), so ``k``, modes and
texts are judged alike everywhere, with the same one-line messages; an unknown parameter is an error
rather than silently ignored (``top_k=5`` must not quietly mean ``k=10``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from annotated_types import Ge, Gt, Le, MaxLen
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.fields import FieldInfo
from starlette.requests import Request
from typing_extensions import Self

from fastrag.arguments import MIN_CHUNK_SIZE, bool_arg, int_arg, integer_text, mode_arg, replace_surrogates, text_arg
from fastrag.config import (
    DEFAULT_K,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MODE,
    DEFAULT_REPO_PATH,
    DEFAULT_SEARCH_RESULTS_DIR,
    MAX_CHUNK_SIZE,
    MAX_K,
    MAX_NEW_TOKENS,
    MODES,
    SearchMode,
)
from fastrag.errors import UsageError
from fastrag.indexing.builder import DEFAULT_EMBED
from fastrag.retrieval.filters import SearchFilter
from fastrag.server.errors import ApiError

#: Longest query or question accepted (characters).
MAX_QUERY_CHARS = 4096
#: Longest span ``GET /span`` returns (characters).
MAX_SPAN_CHARS = 100_000
#: Largest character offset ``GET /span`` accepts.
MAX_OFFSET = 1 << 40

#: The path globs of a search (``path``): one glob or a list of them, checked by
#: :meth:`fastrag.retrieval.filters.SearchFilter.parse`; a query string or form repeats ``path``.
PathGlobs = Annotated[
    Any, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
]
#: A language filter (``lang``): a name from :mod:`fastrag.indexing.languages` or a file suffix.
LangName = Annotated[Any, WithJsonSchema({"type": "string"})]

#: A path parameter: checked and confined by the route (:class:`~fastrag.server.safety.Confinement`), so
#: any JSON value reaches it and gets the command line's message.
PathText = Annotated[Any, WithJsonSchema({"type": "string"})]

_JSON = ("application/json",)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")

RequestT = TypeVar("RequestT", bound="ApiRequest")


def _bound(field: FieldInfo, kind: type) -> Any:
    """The first ``kind`` constraint of a field (``Ge``, ``Le``, ``Gt``, ``MaxLen``), or ``None``."""
    return next((m for m in field.metadata if isinstance(m, kind)), None)


def _check(name: str, field: FieldInfo, value: Any) -> Any:
    """One parameter checked by the command line's rules, with the bounds its ``Field`` declares."""
    kind = field.annotation
    if kind is int:
        ge, gt, le = _bound(field, Ge), _bound(field, Gt), _bound(field, Le)
        low = ge.ge if ge is not None else gt.gt + 1
        return int_arg(name, integer_text(value), low, le.le, prefix="")
    if kind is bool:
        return bool_arg(name, value, prefix="")
    if get_origin(kind) is Literal and get_args(kind) == MODES:
        return mode_arg(value, prefix="")
    if kind is str:
        longest = _bound(field, MaxLen)
        if longest is not None:
            return text_arg(name, value, longest.max_length)
        if not isinstance(value, str):
            raise UsageError(f"{name} must be text, got {value!r}")
    return value


class ApiRequest(BaseModel):
    """A request's parameters, built by :meth:`parse`."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Self:
        """The request of ``raw`` parameters, each checked by :func:`_check` (a :class:`UsageError` names
        the first bad one).

        Those checks cover every constraint of the fields, so pydantic's own validation is not run again:
        its ``str`` refuses lone surrogates, which JSON may spell and search answers like any other text.
        """
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            if name in raw:
                values[name] = _check(name, field, raw[name])
            elif field.is_required():
                raise UsageError(f"{name} is required")
            else:
                values[name] = _check(name, field, field.default)
        request = cls.model_construct(**values)
        request.check()
        return request

    def check(self) -> None:
        """Checks across parameters (none by default)."""


class FilteredRequest(ApiRequest):
    """A request that may restrict the files searched (``path`` globs, ``lang``)."""

    path: PathGlobs = Field(None, description="only files matching a glob (docs/**, *.rs); a list: any may match")
    lang: LangName = Field(None, description="only files of a language (python, markdown, cpp, rust, ...)")

    def check(self) -> None:
        """The filter must parse (a bad glob or language is a 400 with the command line's message)."""
        self.search_filter()

    def search_filter(self) -> SearchFilter:
        """The files the request may return."""
        return SearchFilter.parse(self.path, self.lang, prefix="")


class SearchRequest(FilteredRequest):
    """``GET``/``POST /search``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K, description="how many spans")
    mode: SearchMode = Field(DEFAULT_MODE, description="hybrid is lexical on an index without vectors")


class SearchResult(BaseModel):
    """One retrieved span."""

    rank: int
    file_path: str
    first_character_index: int
    last_character_index: int
    score: float
    first_line: int | None = Field(description="1-based; null when the file cannot be read")
    last_line: int | None
    text: str | None = Field(description="the span's text; null when the file cannot be read")


class FilterEcho(BaseModel):
    """The files a search was restricted to."""

    path: list[str] = Field(description="globs (any may match); empty: every path")
    lang: str | None = Field(description="language name; null: any")


class SearchResponse(BaseModel):
    """The spans that best answer a query."""

    query: str
    searched: str = Field(description="the query as searched: its mistyped words read as the index spells them")
    k: int
    mode: SearchMode
    filter: FilterEcho
    generation: str = Field(description="the index generation searched")
    results: list[SearchResult]


class AnswerRequest(ApiRequest):
    """``POST /answer``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question")
    k: int = Field(DEFAULT_K, ge=0, le=MAX_K, description="spans to retrieve; 0 answers without a model")
    mode: SearchMode = DEFAULT_MODE
    stream: bool = Field(False, description="server-sent events: data events carry text, then sources, done")
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, le=MAX_NEW_TOKENS)


class Source(BaseModel):
    """A retrieved span (the exercise's ``MinimalSource``)."""

    file_path: str
    first_character_index: int
    last_character_index: int


class CitedSource(Source):
    """A span the answer cites, with its citation text ``[path:first-last]``."""

    citation: str


class AnswerResponse(BaseModel):
    """A grounded answer; also the payload of the stream's ``sources`` event."""

    question: str
    answer: str = Field(description="the answer as saved by the CLI: citations expanded, never empty")
    sources: list[Source] = Field(description="the spans retrieved")
    cited: list[CitedSource] = Field(description="the excerpts the answer cites (all shown if it cites none)")
    model: str | None
    prompt_tokens: int = Field(description="tokens the model read; 0 when the lead answered and it was asked nothing")
    seconds: float


class IndexRequest(ApiRequest):
    """``POST /index``."""

    max_chunk_size: int = Field(MAX_CHUNK_SIZE, ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE)
    repo_path: PathText = Field(str(DEFAULT_REPO_PATH), description="inside data/")
    vectors: str = Field(DEFAULT_EMBED, description="which chunks get vectors: none, docs, ...")


class IndexResponse(BaseModel):
    """What an index build did."""

    files: int
    chunks: int
    seconds: float
    up_to_date: bool
    generation: str | None
    chunked: int
    reused: int
    removed: int
    skipped: int
    vectors: int
    #: Chunks the embedding model cannot encode (left without a vector).
    vectors_skipped: int = 0
    #: The generation published first (lexical, searchable while the vectors were embedded), and when.
    lexical_generation: str | None = None
    lexical_seconds: float = 0.0


class SearchDatasetRequest(FilteredRequest):
    """``POST /search_dataset``."""

    dataset_path: PathText = Field(description="a dataset JSON file inside data/")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K)
    save_directory: PathText = Field(str(DEFAULT_SEARCH_RESULTS_DIR), description="inside data/")
    mode: SearchMode = DEFAULT_MODE


class SearchDatasetResponse(BaseModel):
    """Where the results file went."""

    saved_to: str
    questions: int
    k: int
    mode: SearchMode
    seconds: float


class SpanRequest(ApiRequest):
    """``GET /span``."""

    start: int = Field(ge=0, le=MAX_OFFSET)
    end: int = Field(ge=0, le=MAX_OFFSET)
    path: PathText = Field(description="a file of the index, as results name it")

    def check(self) -> None:
        """The span must be non-empty and at most :data:`MAX_SPAN_CHARS` long."""
        if self.end <= self.start:
            raise UsageError(f"end must be greater than start, got start={self.start}, end={self.end}")
        if self.end - self.start > MAX_SPAN_CHARS:
            raise UsageError(f"span too long: {self.end - self.start} characters, at most {MAX_SPAN_CHARS}")


class SpanResponse(BaseModel):
    """A span of an indexed file."""

    file_path: str
    start: int
    end: int
    first_line: int
    last_line: int
    text: str


class Health(BaseModel):
    """``GET /healthz``."""

    status: Literal["ok"]
    generation: str | None
    #: The repository served, as a person names it (:func:`~fastrag.indexing.sources.repository_name`).
    repository: str | None = None
    files: int
    chunks: int
    vectors: bool
    #: ``lexical`` (no vectors asked), ``pending`` / ``building`` (searches rank by words meanwhile), ``ready``.
    vectors_state: Literal["lexical", "pending", "building", "ready"] | None = None
    index_error: str | None
    model: str
    model_note: str | None = None
    model_loaded: bool
    cache_entries: int
    cache_hits: int
    cache_misses: int


class ErrorResponse(BaseModel):
    """Every error: 4xx for the request, 5xx for the server."""

    error: str


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` documenting a body accepted as JSON or as a form."""
    schema = model.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": schema},
                "application/x-www-form-urlencoded": {"schema": schema},
            },
        }
    }


def query_doc(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` documenting query-string parameters."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    return {
        "parameters": [
            {"name": name, "in": "query", "required": name in required, "schema": prop}
            for name, prop in schema["properties"].items()
        ]
    }


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (400, "bad parameter or path outside data/"),
        (403, "cross-origin write refused"),
        (413, "body too large"),
        (503, "no index yet, or no model"),
    )
}


async def read_params(request: Request, accepted: Collection[str]) -> dict[str, Any]:
    """The request's parameters: query string for ``GET``, JSON object or form body otherwise."""
    if request.method in ("GET", "HEAD"):
        raw: dict[str, Any] = _repeated(request.query_params.multi_items())
    else:
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind in _JSON or kind.endswith("+json"):
            raw = _json_object(await request.body())
        elif kind in _FORMS:
            form = await request.form(max_files=0)
            items: list[tuple[str, str]] = []
            for key, value in form.multi_items():
                if not isinstance(value, str):
                    raise UsageError(f"{key}: file uploads are not accepted")
                items.append((key, value))
            raw = _repeated(items)
        elif not await request.body():
            raw = {}
        else:
            raise ApiError(415, f"unsupported content type {kind or 'none'!r}: send JSON or a form")
    unknown = sorted(set(raw) - set(accepted))
    if unknown:
        raise UsageError(f"unknown parameter {unknown[0]!r} (accepted: {', '.join(sorted(accepted))})")
    return raw


#: Parameters a query string or form may repeat (their values become a list).
REPEATABLE = frozenset({"path"})


def _repeated(items: Collection[tuple[str, str]]) -> dict[str, Any]:
    """Parameters of a query string or form: all the values of one of :data:`REPEATABLE`; any other
    given twice is an error (``k=3&k=4`` must not quietly mean one of them)."""
    raw: dict[str, Any] = {}
    for key, value in items:
        if key in REPEATABLE and key in raw:
            previous = raw[key]
            raw[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        elif key in raw:
            raise UsageError(f"parameter {key!r} is given more than once")
        else:
            raw[key] = value
    return raw


def _json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        data = json.loads(body, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise UsageError("the body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise UsageError(f"the JSON body must be an object, got {type(data).__name__}")
    result: dict[str, Any] = replace_surrogates(data)  # "\ud800" is JSON, not text UTF-8 can carry
    return result


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different: ``{"k": 3, "k": 4}`` must not quietly mean one of
    them (as ``k=3&k=4`` in a query string does not)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise UsageError(f"parameter {key!r} is given more than once")
        found[key] = value
    return found


def parsed(model: type[RequestT]) -> Callable[[Request], Awaitable[RequestT]]:
    """The FastAPI dependency that reads a request's parameters and validates them with ``model``."""

    async def dependency(request: Request) -> RequestT:
        return model.parse(await read_params(request, model.model_fields))

    return dependency
