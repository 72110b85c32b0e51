"""``fastrag mcp``: the index as Model Context Protocol tools for coding agents (official ``mcp`` SDK).

Four tools, on stdio (the default: the agent starts the process) or streamable HTTP (``--transport http``,
bound to 127.0.0.1 unless told otherwise):

* ``search``: ranked spans with path, character and line ranges, score and a short snippet (browse first);
* ``read_span``: the full text of a span (expand on request), for files of the index only, confined
  like the HTTP API's ``/span`` (:class:`~fastrag.server.safety.Confinement`);
* ``answer``: a cited answer (the model is loaded on the first question, chosen as the CLI chooses it);
* ``index_status``: generation, files, chunks, vectors, model.

The process reuses the HTTP server's parts: the live index is opened once and follows new generations
(:class:`~fastrag.server.live.LiveIndex`), file texts are cached (:class:`~fastrag.server.texts.SourceTexts`)
and one worker owns the model (:class:`~fastrag.server.answers.Answerer`). Arguments are checked by the
command line's rules; a bad one is a tool error carrying the command line's one-line message, never a
crash of the server.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from fastrag.arguments import int_arg, mode_arg, text_arg
from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MAX_NEW_TOKENS, DEFAULT_MODE, MAX_K
from fastrag.errors import UsageError, UserError
from fastrag.indexing.generations import SHARDS_KEY
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.retriever import hits_to_sources
from fastrag.server.answers import Answerer
from fastrag.server.live import LiveIndex
from fastrag.server.results import SearchResults
from fastrag.server.safety import Confinement
from fastrag.server.schemas import MAX_OFFSET, MAX_QUERY_CHARS, MAX_SPAN_CHARS
from fastrag.server.texts import SourceTexts

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
        models = data / "models"
        self.live = LiveIndex(Path(os.path.abspath(index_dir)), models)
        self.texts = SourceTexts(self.root, locate=self.live.locate)  # as the HTTP API reads them
        self.results = SearchResults(self.live, self.texts)
        self.confinement = Confinement(self.root, data, self.live.corpus_roots)
        self.answerer = Answerer(model, models, self.texts)

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
        live = self.results.current()
        # a result's path is read where the index recorded its repository (as ``/span`` does);
        # anything else must be a path inside data/ naming a file of the index
        indexed = isinstance(path, str) and path in live.paths
        name = path if indexed else self.confinement.display(self.confinement.check("path", path))
        if name not in live.paths:
            raise UserError(f"{path} is not a file of the index")
        found = self.texts.get(name)
        if found is None:
            raise UserError(f"{name} cannot be read")
        if hi > len(found.text):
            raise UserError(f"end {hi} is past the end of {name} ({len(found.text)} characters)")
        first, last = found.lines(lo, hi)
        return {"path": name, "start": lo, "end": hi, "first_line": first, "last_line": last, "text": found.text[lo:hi]}

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
        """What is indexed, and the model."""
        live = self.results.current()
        index = live.retriever.index
        shards = index.manifest.get(SHARDS_KEY)
        return {
            "generation": live.generation,
            "files": len(live.paths),
            "chunks": len(index.chunks),
            "vectors": int(index.manifest.get("vectors") or 0),
            "repository": index.manifest.get("display_root"),
            "shards": [s.get("name") for s in shards] if isinstance(shards, list) else [],
            "model": self.answerer.name,
            "model_note": self.answerer.note,
            "model_loaded": self.answerer.loaded,
        }

    def close(self) -> None:
        """Stop the model's worker."""
        self.answerer.close()


def _tool_call(work: Callable[[], ResultT]) -> ResultT:
    """Run a tool's work; a user error (bad argument, no index, no model) becomes a tool error."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return work()
    except UserError as exc:
        raise ToolError(str(exc)) from None


def create_server(tools: Tools) -> Any:
    """The MCP server (an ``mcp`` ``MCPServer``) exposing ``tools``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(name="fastrag", instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def search(
        query: str,
        k: int = DEFAULT_TOOL_K,
        mode: Literal["lexical", "vector", "hybrid"] = DEFAULT_MODE,
        path: list[str] | None = None,
        lang: str | None = None,
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
        """
        return _tool_call(lambda: tools.search(query, k, mode, path, lang))

    @server.tool(annotations=read_only)
    def read_span(path: str, start: int, end: int) -> dict[str, Any]:
        """Read the text of a span of an indexed file: characters [start, end) of path, as search returns them.

        Returns the text with its 1-based first and last line. Only files of the index can be read;
        at most 100000 characters at once. Widen start/end to see the context around a hit.
        """
        return _tool_call(lambda: tools.read_span(path, start, end))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def answer(question: str, k: int = DEFAULT_TOOL_K) -> dict[str, Any]:
        """Answer a question about the repository with a local language model, citing the spans it used.

        Retrieves the k best spans (1..10) and writes a short answer with citations [path:first-last].
        Slow on a CPU (seconds, plus loading the model on the first call): searching and reading spans
        is usually better for an agent.
        """
        return _tool_call(lambda: tools.answer(question, k))

    @server.tool(annotations=read_only)
    def index_status() -> dict[str, Any]:
        """What is indexed: the live index generation, its files, chunks and vectors, and the answer model."""
        return _tool_call(tools.index_status)

    return server


def run(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    index_dir: Path = DEFAULT_INDEX_DIR,
    model: str | None = None,
    data_dir: Path = Path("data"),
) -> None:
    """Serve the tools on ``transport`` until the client leaves (stdio) or Ctrl-C (http).

    Over HTTP, prints ``fastrag mcp serving on http://host:port/mcp`` once the socket listens; a
    loopback server only answers requests addressed to a loopback name. The socket is bound before
    the index and its embedding model load, so an address that cannot be bound fails at once.
    """
    if transport not in TRANSPORTS:
        raise UsageError(f"--transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    from fastrag.server.run import bind

    sock = bind(host, port) if transport == "http" else None
    tools = Tools(index_dir, data_dir, model)
    if tools.live.peek() is None:
        print(f"fastrag: no index in {index_dir} yet: run `python -m fastrag index`", file=sys.stderr)
    server = create_server(tools)
    try:
        if sock is None:
            server.run("stdio")
        else:
            _serve_http(server, host, sock)
    finally:
        tools.close()
        if sock is not None:
            sock.close()


def _serve_http(server: Any, host: str, sock: socket.socket) -> None:
    """Streamable HTTP on the socket bound to ``host`` (bound first, so port 0 picks a free port)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from fastrag.server.run import LOOPBACK_NAMES, address, is_loopback

    security = None
    if is_loopback(host):
        bound = sock.getsockname()[1]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{name}:{bound}" for name in LOOPBACK_NAMES] + [f"[::1]:{bound}"],
            allowed_origins=[f"http://{name}:{bound}" for name in LOOPBACK_NAMES],
        )
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, transport_security=security, host=host)
    print(f"fastrag mcp serving on {address(sock)}{HTTP_PATH}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
