"""``fastrag mcp``: the index as Model Context Protocol tools for coding agents (official ``mcp`` SDK).

Four tools, on stdio (the default: the agent starts the process) or streamable HTTP (``--transport http``,
bound to 127.0.0.1 unless told otherwise):

* ``search``: ranked spans with path, character and line ranges, score and a short snippet (browse first);
* ``read_span``: the full text of a span (expand on request), for files of the index only, read as
  they were indexed (:class:`~fastrag.indexing.reading.IndexedFiles`: a file swapped for a link or
  changed since is refused);
* ``answer``: a cited answer (the model is loaded on the first question, chosen as the CLI chooses it);
* ``index_status``: generation, files, chunks, vectors (lexical only, pending, building or ready), model.

The process reuses the HTTP server's parts: the live index is opened once and follows new generations
(:class:`~fastrag.server.live.LiveIndex`), file texts are cached (:class:`~fastrag.server.texts.SourceTexts`)
and one worker owns the model (:class:`~fastrag.server.answers.Answerer`). Arguments are strict (an
unknown argument, a boolean for a number, a string for a list is refused) and then checked by the command
line's rules; a bad one is a tool error carrying a one-line message, never a crash of the server.

Every request gets a reply: text the client sent that UTF-8 cannot carry (a lone surrogate) is echoed
with a replacement character, and a line that is not JSON-RPC gets a JSON-RPC error. Over HTTP the
server is guarded as ``serve`` is (:class:`~fastrag.server.safety.Guard`, :func:`~fastrag.server.auth.access_for`):
loopback names only on a loopback bind; elsewhere a bearer token, the allowed ``Host`` names, and no
foreign ``Origin`` on a write.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from typing_extensions import Self

from fastrag.arguments import int_arg, mode_arg, replace_surrogates, text_arg
from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MAX_NEW_TOKENS, DEFAULT_MODE, MAX_K, version
from fastrag.errors import UsageError, UserError, as_invoked
from fastrag.indexing.generations import SHARDS_KEY
from fastrag.indexing.sources import repository_name
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.retriever import hits_to_sources
from fastrag.server.agent_tools import AgentTools
from fastrag.server.agent_tools import register as register_agent_tools
from fastrag.server.answers import Answerer
from fastrag.server.auth import Exposure, access_for, announce
from fastrag.server.budget import DEFAULT_MAX_TOKENS, budgeted
from fastrag.server.live import LiveIndex
from fastrag.server.results import SearchResults
from fastrag.server.schemas import MAX_OFFSET, MAX_QUERY_CHARS, MAX_SPAN_CHARS
from fastrag.server.texts import SourceTexts, span_text
from fastrag.workspace import models_dir_of

#: Results ``search`` returns unless asked.
DEFAULT_TOOL_K = 5
#: Characters of each hit's snippet (the start of the span, whitespace collapsed).
SNIPPET_CHARS = 240
#: The transports ``--transport`` accepts.
TRANSPORTS = ("stdio", "http")
#: Where the streamable HTTP transport answers.
HTTP_PATH = "/mcp"

INSTRUCTIONS = (
    "fastrag searches one indexed code repository (BM25 over syntax-aware chunks, optionally fused with "
    "vectors). Browse with `search` (short snippets), then read the spans you need with `read_span`; "
    "restrict a search to files with `path` globs (docs/**, *.rs) or a `lang`. `answer` writes a cited "
    "answer with a local model (slow on a CPU: prefer search + read_span). `index_status` tells what is indexed."
)

ResultT = TypeVar("ResultT")


class Tools:
    """The tools' work, independent of the protocol (tests call it directly too)."""

    def __init__(self, index_dir: Path, data_dir: Path, model: str | None = None) -> None:
        data = Path(os.path.abspath(data_dir))
        self.root = data.parent
        models = models_dir_of(self.root)  # never inside the user's repository
        self.live = LiveIndex(Path(os.path.abspath(index_dir)), models)
        self.texts = SourceTexts(self.live.read)  # as the HTTP API reads them
        self.results = SearchResults(self.live, self.texts)
        self.answerer = Answerer(model, models, self.texts)
        self.agent = AgentTools(self.live)

    def search(self, query: Any, k: Any, mode: Any, path: Any, lang: Any) -> dict[str, Any]:
        """Ranked hits with path, character and line ranges, score and snippet."""
        text = text_arg("the query", query, MAX_QUERY_CHARS)
        n = int_arg("k", k, 1, MAX_K, prefix="")
        chosen_mode = mode_arg(mode, prefix="")
        chosen = SearchFilter.parse(path, lang, prefix="")
        live = self.results.current()
        hits = live.search(text, n, chosen_mode, chosen)
        out = []
        for rank, hit in enumerate(hits, 1):
            found = self.texts.get(hit.file_path)
            first, last = found.lines(hit.start, hit.end) if found is not None else (None, None)
            span = found.text[hit.start : hit.end] if found is not None else ""
            snippet = " ".join(span[: SNIPPET_CHARS * 2].split())[:SNIPPET_CHARS]
            out.append(
                {
                    "rank": rank,
                    "path": hit.file_path,
                    "start": hit.start,
                    "end": hit.end,
                    "first_line": first,
                    "last_line": last,
                    "score": round(hit.score, 4),
                    "snippet": snippet,
                }
            )
        return {
            "query": text,
            "searched": live.retriever.searched(text),
            "mode": chosen_mode,
            "filter": chosen.as_json(),
            "generation": live.generation,
            "hits": out,
        }

    def read_span(self, path: Any, start: Any, end: Any) -> dict[str, Any]:
        """The text of ``path[start:end]`` with its line range, for a file of the live index only."""
        lo = int_arg("start", start, 0, MAX_OFFSET, prefix="")
        hi = int_arg("end", end, 0, MAX_OFFSET, prefix="")
        if hi < lo:
            raise UserError(f"end ({hi}) must not be before start ({lo})")
        if hi - lo > MAX_SPAN_CHARS:
            raise UserError(f"span too long: {hi - lo} characters, at most {MAX_SPAN_CHARS}")
        self.results.current()  # a new generation empties the caches of texts
        # a result's path, the path inside its repository, or a path on disk naming a file of the index
        # (links not resolved); read where the index recorded its repository, as indexed
        files, _ = self.agent.files()
        name = files.path_arg(path)
        text, first, last = span_text(self.texts, name, lo, hi)
        return {"path": name, "start": lo, "end": hi, "first_line": first, "last_line": last, "text": text}

    def answer(self, question: Any, k: Any) -> dict[str, Any]:
        """A cited answer from the ``k`` best spans."""
        text = text_arg("the question", question, MAX_QUERY_CHARS)
        n = int_arg("k", k, 1, MAX_K, prefix="")
        sources = hits_to_sources(self.results.current().search(text, n, DEFAULT_MODE))
        if not sources:
            return {"question": text, "answer": "No indexed span matches the question.", "cited": []}
        done = self.answerer.generate(text, sources, DEFAULT_MAX_NEW_TOKENS).result()
        return {
            "question": text,
            "answer": done.answer,
            "cited": [
                {"path": e.source.file_path, "start": e.start, "end": e.end, "citation": e.citation} for e in done.cited
            ],
            "model": self.answerer.name,
        }

    def index_status(self) -> dict[str, Any]:
        """What is indexed, and the model; ``vectors_status``: lexical only, vectors pending, building or
        ready, with counts (:func:`~fastrag.indexing.vector_stage.vector_status`)."""
        from fastrag.indexing.vector_stage import vector_status

        live = self.results.current()
        index = live.retriever.index
        shards = index.manifest.get(SHARDS_KEY)
        return {
            "generation": live.generation,
            "files": len(live.paths),
            "chunks": len(index.chunks),
            "vectors": int(index.manifest.get("vectors") or 0),
            "vectors_status": vector_status(self.live.index_dir, live.generation, index.manifest),
            "repository": repository_name(index.manifest),
            "repository_path": index.manifest.get("repo_path"),
            "version": version(),
            "shards": [s.get("name") for s in shards] if isinstance(shards, list) else [],
            "model": self.answerer.name,
            "model_note": self.answerer.note,
            "model_loaded": self.answerer.loaded,
            "freshness": self.agent.freshness(),
        }

    def close(self) -> None:
        """Stop the model's worker and the watcher."""
        self.answerer.close()
        self.agent.close()


def _tool_call(work: Callable[[], ResultT]) -> ResultT:
    """Run a tool's work; a user error (bad argument, no index, no model) becomes a tool error. The
    result's texts are made encodable (:func:`encodable`)."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        result: ResultT = encodable(work())
        return result
    except UserError as exc:
        raise ToolError(encodable(" ".join(as_invoked(str(exc)).split()))) from None


def encodable(value: Any) -> Any:
    """``value`` with every string UTF-8 can carry: lone surrogates (which JSON may spell, and a client
    may send) replaced (:func:`~fastrag.arguments.replace_surrogates`), so that the reply can be written."""
    return replace_surrogates(value)


def reparse(failure: Exception) -> tuple[Any, Any]:
    """``(message, None)``: the line the SDK failed to parse (``failure``) parsed again with lone
    surrogates replaced; else ``(None, error)``: the JSON-RPC error answering it (a parse error, or an
    invalid request for JSON that is not a JSON-RPC message)."""
    import json

    import mcp_types
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    first: Any = failure.errors()[0] if isinstance(failure, ValidationError) and failure.errors() else {}
    code, text = mcp_types.INVALID_REQUEST, "Invalid Request"
    if first.get("type") == "json_invalid" or not isinstance(failure, ValidationError):
        code, text = mcp_types.PARSE_ERROR, "Parse error"
        line = first.get("input")
        try:
            raw = json.loads(line) if isinstance(line, (str, bytes)) else None
            if raw is not None:  # JSON after all: Python reads lone surrogates, which the SDK's parser refuses
                message = mcp_types.jsonrpc_message_adapter.validate_python(encodable(raw), by_name=False)
                return SessionMessage(message), None
        except (ValueError, RecursionError):  # not JSON (or not a message): answered below
            pass
    error = mcp_types.JSONRPCError(jsonrpc="2.0", id=None, error=mcp_types.ErrorData(code=code, message=text))
    return None, SessionMessage(error)


def strict_arguments(tool: str, model: Any, arguments: dict[str, Any]) -> None:
    """Refuse (a one-line ``ToolError``) arguments of ``tool`` that its argument ``model`` does not
    name, or whose type is not exactly the declared one (``true`` for a number, ``"5"`` for a number)."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    accepted = sorted(model.model_fields)
    unknown = sorted(set(arguments) - set(accepted))
    if unknown:
        raise ToolError(
            encodable(f"unknown argument {unknown[0]!r} of {tool} (accepted: {', '.join(accepted) or 'none'})")
        )
    try:
        model.model_validate(arguments, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        got = repr(first.get("input"))[:80]
        raise ToolError(encodable(" ".join(f"{where}: {first['msg']}, got {got}".split()))) from None


#: What a line the SDK would not answer becomes: valid JSON, no JSON-RPC message, so an Invalid Request
#: error with id null answers it (:class:`RepliedReadStream`).
UNANSWERABLE_LINE = '{"jsonrpc": "2.0", "id": null}\n'


def answerable_line(line: str) -> str:
    """``line`` as read, unless it is a request whose ``id`` is neither a string nor an integer (an object,
    a float, null): the SDK would take it for a notification and never reply, so it becomes
    :data:`UNANSWERABLE_LINE`, which gets an error reply (JSON-RPC: every request is answered)."""
    import json

    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):  # not JSON: the SDK's parse error answers it
        return line
    if isinstance(raw, dict) and "method" in raw and "id" in raw:
        ident = raw["id"]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            return UNANSWERABLE_LINE
    return line


class AnswerableLines:
    """The lines of the standard input (an ``anyio`` text file) passed through :func:`answerable_line`."""

    def __init__(self, inner: Any) -> None:
        self._lines = inner.__aiter__()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        return answerable_line(await self._lines.__anext__())


class RepliedReadStream:
    """A transport's read stream that answers every line: one the SDK could not parse because it spells
    a lone surrogate (JSON may, UTF-8 cannot carry it) is parsed again with the surrogate replaced; any
    other failure (not JSON, not a JSON-RPC message) gets a JSON-RPC error on ``write_stream`` (with the
    request's id when it has one) instead of being dropped."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK reads it when present)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        """The next message; lines that cannot be one are answered and skipped."""
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            message, error = reparse(item)
            if message is not None:
                return message
            await self._write.send(error)

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


def create_server(tools: Tools) -> Any:
    """The MCP server (an ``mcp`` ``MCPServer``) exposing ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.stdio import stdio_server
    from mcp.types import ToolAnnotations

    class StrictServer(MCPServer):
        """The SDK's server, with strict tool arguments and a reply to every line on stdio."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                strict_arguments(name, tool.fn_metadata.arg_model, tool.fn_metadata.pre_parse_json(arguments))
            return await super().call_tool(name, arguments, context)

        async def run_stdio_async(self) -> None:
            import io

            import anyio

            # a duplicate of fd 0, read as UTF-8 (as the SDK reads it), every line checked to get a reply
            wire = io.TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8", errors="replace")
            lines: Any = AnswerableLines(anyio.wrap_file(wire))
            async with stdio_server(stdin=lines) as (read_stream, write_stream):
                low = self._lowlevel_server
                await low.run(
                    RepliedReadStream(read_stream, write_stream), write_stream, low.create_initialization_options()
                )

    server = StrictServer(name="fastrag", version=version(), instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def search(
        query: str,
        k: int = DEFAULT_TOOL_K,
        mode: Literal["lexical", "vector", "hybrid"] = DEFAULT_MODE,
        path: list[str] | None = None,
        lang: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> dict[str, Any]:
        """Search the indexed repository for the spans that best answer a question or match identifiers.

        Returns up to k hits, best first, each with its file path, character range [start, end), line
        range, score and a short snippet; call read_span(path, start, end) for the full text.
        Args: query: a question or identifiers (e.g. "how are LoRA adapters loaded at runtime").
        k: hits to return, 1..10. mode: hybrid (default; lexical when the index has no vectors),
        lexical or vector. path: only files matching any of these globs, relative to the repository
        (docs/**, *.rs, src/**/*.py). lang: only files of one language (python, markdown, rst, text, cpp,
        c, cuda, rust, go, java, kotlin, javascript, typescript, shell, csharp, php, ruby, swift, scala,
        elixir, haskell, lua, zig, dart, toml, yaml, json, ...) or a suffix (py).
        max_tokens: budget of the response (100..100000, default 2000): the last hits go first.
        """
        return _tool_call(lambda: budgeted(lambda: tools.search(query, k, mode, path, lang), "hits", max_tokens))

    @server.tool(annotations=read_only)
    def read_span(path: str, start: int, end: int, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
        """Read the text of a span of an indexed file: characters [start, end) of path, as search returns them.

        Returns the text with its 1-based first and last line. Only files of the index can be read;
        at most 100000 characters at once. Widen start/end to see the context around a hit. max_tokens:
        budget of the response (100..100000, default 2000): the last lines of the text go first.
        """
        hint = "read the rest with a later start"
        return _tool_call(lambda: budgeted(lambda: tools.read_span(path, start, end), None, max_tokens, hint))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def answer(question: str, k: int = DEFAULT_TOOL_K, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
        """Answer a question about the repository with a local language model, citing the spans it used.

        Retrieves the k best spans (1..10) and writes a short answer with citations [path:first-last].
        Slow on a CPU (seconds, plus loading the model on the first call): searching and reading spans
        is usually better for an agent. max_tokens: budget of the response (100..100000, default 2000).
        """
        return _tool_call(lambda: budgeted(lambda: tools.answer(question, k), "cited", max_tokens))

    register_agent_tools(server, tools.agent, read_only, _tool_call)

    @server.tool(annotations=read_only)
    def index_status(max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
        """What is indexed: the live index generation, its files, chunks and vectors, and the answer model.

        vectors_status.state: lexical (no vectors asked), pending or building (searches rank by words
        meanwhile), or ready, with counts.

        max_tokens: budget of the response (100..100000, default 2000).
        """
        return _tool_call(lambda: budgeted(tools.index_status, "shards", max_tokens))

    return server


def run(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    index_dir: Path = DEFAULT_INDEX_DIR,
    model: str | None = None,
    data_dir: Path = Path("data"),
    *,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    watch: bool = False,
) -> None:
    """Serve the tools on ``transport`` until the client leaves (stdio) or Ctrl-C (http); with ``watch``,
    keep the index fresh meanwhile (:class:`~fastrag.indexing.watch.Watcher`; ``index_status`` says how fresh).

    Over HTTP, prints ``fastrag mcp serving on http://host:port/mcp`` once the socket listens; the
    server is guarded as ``serve`` is (:func:`~fastrag.server.auth.access_for`: ``token`` and
    ``allowed_hosts`` are the command line's). The socket is bound before the index and its embedding
    model load, so an address that cannot be bound fails at once.
    """
    if transport not in TRANSPORTS:
        raise UsageError(f"--transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    from fastrag.server.run import bind

    exposure = None
    if transport == "http":  # clients are programs: the token stands in for the page's Origin
        exposure = access_for(host, token, allowed_hosts, origin_on_writes=False)
    elif token is not None or allowed_hosts:
        raise UsageError("--token and --allowed_host apply to --transport http only")
    sock = bind(host, port) if exposure is not None else None
    tools = Tools(index_dir, data_dir, model)
    if tools.live.peek() is None:
        print(as_invoked(f"fastrag: no index in {index_dir} yet: run `fastrag index`"), file=sys.stderr)
    elif watch:
        tools.agent.watch(index_dir)
    server = create_server(tools)
    try:
        if sock is None or exposure is None:
            server.run("stdio")
        else:
            _serve_http(server, host, sock, exposure)
    finally:
        tools.close()
        if sock is not None:
            sock.close()


def _serve_http(server: Any, host: str, sock: socket.socket, exposure: Exposure) -> None:
    """Streamable HTTP on the socket bound to ``host`` (bound first, so port 0 picks a free port), behind
    the HTTP API's :class:`~fastrag.server.safety.Guard` (which takes over the SDK's own Host check)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from fastrag.server.run import address
    from fastrag.server.safety import Guard
    from fastrag.server.timeouts import server_config

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # the Guard checks Host and Origin
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, transport_security=security, host=host)
    guarded = Guard(app, allowed_hosts=exposure.allowed_hosts, access=exposure.access)
    print(f"fastrag mcp serving on {address(sock)}{HTTP_PATH}", flush=True)
    announce(host, exposure)
    uvicorn.Server(server_config(guarded)).run(sockets=[sock])
