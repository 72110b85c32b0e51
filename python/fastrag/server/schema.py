"""The API's request and response shapes, for ``/openapi.json``.

Requests are parsed and checked by :mod:`fastrag.server.params` (JSON or form, the command line's
rules); these models only document them, and the responses, in the OpenAPI schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from fastrag.arguments import MIN_CHUNK_SIZE
from fastrag.config import DEFAULT_K, DEFAULT_REPO_PATH, DEFAULT_SEARCH_RESULTS_DIR, MAX_CHUNK_SIZE, MAX_K
from fastrag.server.params import DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS, MAX_QUERY_CHARS

Mode = Literal["lexical", "vector", "hybrid"]


class SearchRequest(BaseModel):
    """``GET``/``POST /search``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K, description="how many spans")
    mode: Mode = Field("hybrid", description="hybrid is lexical on an index without vectors")


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


class SearchResponse(BaseModel):
    """The spans that best answer a query."""

    query: str
    k: int
    mode: Mode
    generation: str = Field(description="the index generation searched")
    results: list[SearchResult]


class AnswerRequest(BaseModel):
    """``POST /answer``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the question")
    k: int = Field(DEFAULT_K, ge=0, le=MAX_K, description="spans to retrieve; 0 answers without a model")
    mode: Mode = "hybrid"
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
    prompt_tokens: int
    seconds: float


class IndexRequest(BaseModel):
    """``POST /index``."""

    max_chunk_size: int = Field(MAX_CHUNK_SIZE, ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE)
    repo_path: str = Field(str(DEFAULT_REPO_PATH), description="inside data/")
    vectors: str = Field("none", description="which chunks get vectors: none, docs, ...")


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


class SearchDatasetRequest(BaseModel):
    """``POST /search_dataset``."""

    dataset_path: str = Field(description="a dataset JSON file inside data/")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K)
    save_directory: str = Field(str(DEFAULT_SEARCH_RESULTS_DIR), description="inside data/")
    mode: Mode = "hybrid"


class SearchDatasetResponse(BaseModel):
    """Where the results file went."""

    saved_to: str
    questions: int
    k: int
    mode: Mode
    seconds: float


class SpanRequest(BaseModel):
    """``GET /span``."""

    path: str = Field(description="a file of the index, as results name it")
    start: int = Field(ge=0)
    end: int = Field(gt=0)


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
    files: int
    chunks: int
    vectors: bool
    index_error: str | None
    model: str
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
