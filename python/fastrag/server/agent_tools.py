"""The MCP tools beside search: ``find_definitions``, ``find_references``, ``outline`` (and ``grep``), on the
live index, each bounded by a token budget (:mod:`fastrag.server.budget`).

Arguments are checked by the command line's rules (a bad one is a :class:`~fastrag.errors.UserError`,
which the server turns into a tool error); the work is the library's
(:mod:`fastrag.retrieval.symbols`, :mod:`fastrag.retrieval.references`, :mod:`fastrag.retrieval.grep`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastrag.arguments import bool_arg
from fastrag.errors import UsageError
from fastrag.indexing.watch import Watcher
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.grep import grep, pattern_arg, unreadable_json
from fastrag.retrieval.lookup import IndexFiles
from fastrag.retrieval.references import as_json, find_references
from fastrag.retrieval.symbols import definition_name, find_definitions, outline
from fastrag.server.budget import DEFAULT_MAX_TOKENS, fit, max_tokens_arg
from fastrag.server.live import LiveIndex

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

__all__ = ["AgentTools", "register"]

#: Definitions and occurrences looked at before the budget trims them.
MAX_RESULTS = 1000


class AgentTools:
    """Symbol and exact-search tools over the generation a :class:`LiveIndex` keeps live."""

    def __init__(self, live: LiveIndex) -> None:
        """Tools reading ``live``."""
        self.live = live
        self.watcher: Watcher | None = None
        self._files: IndexFiles | None = None
        self._generation = ""
        self._lock = threading.Lock()

    def watch(self, index_dir: Path) -> None:
        """Keep ``index_dir`` fresh in a background thread (``mcp --watch``)."""
        self.watcher = Watcher.of_index(index_dir).start()

    def freshness(self) -> dict[str, Any]:
        """How fresh the index is (:meth:`Watcher.status`; without a watcher, only that nobody watches)."""
        return self.watcher.status() if self.watcher is not None else {"watching": False}

    def close(self) -> None:
        """Stop watching."""
        if self.watcher is not None:
            self.watcher.stop()

    def files(self) -> tuple[IndexFiles, str]:
        """The live generation's files (their texts cached for as long as it is live) and its name."""
        current = self.live.current()  # no index: a user error the server reports
        with self._lock:
            if self._files is None or self._generation != current.generation:
                self._files = IndexFiles(current.retriever.files)
                self._generation = current.generation
            return self._files, self._generation

    def find_definitions(self, name: Any, max_tokens: Any) -> dict[str, Any]:
        """Every definition of ``name``, best first, within the budget."""
        wanted, qualifiers = definition_name(name)
        budget = max_tokens_arg(max_tokens)
        files, generation = self.files()
        found = find_definitions(files.index.symbols, files.paths, wanted, qualifiers)
        payload = {
            "name": wanted,
            "qualifiers": list(qualifiers),
            "generation": generation,
            "total": len(found),
            "definitions": [d.as_json() for d in found[:MAX_RESULTS]],
        }
        return fit(payload, "definitions", budget, "read_span or outline(path) shows one in full")

    def find_references(self, name: Any, path: Any, lang: Any, max_tokens: Any) -> dict[str, Any]:
        """Every occurrence of ``name``, grouped by file, code apart from comments and strings."""
        wanted, qualifiers = definition_name(name)
        if qualifiers:
            raise UsageError(f"find_references takes one identifier, not a qualified name: {name!r}")
        chosen = SearchFilter.parse(path, lang, prefix="")
        budget = max_tokens_arg(max_tokens)
        files, generation = self.files()
        paths = files.chosen(chosen)
        groups, total = find_references(paths, files.read, wanted, MAX_RESULTS)
        counts: dict[str, int] = {}
        for group in groups:
            for ref in group.references:
                counts[ref.place] = counts.get(ref.place, 0) + 1
        payload = {
            "name": wanted,
            "generation": generation,
            "total": total,
            "by_place": counts,
            **unreadable_json(files.refused_among(paths)),
            "files": as_json(groups),
        }
        return fit(payload, "files", budget, "narrow it with path or lang, or raise max_tokens")

    def grep(self, pattern: Any, regex: Any, ignore_case: Any, path: Any, lang: Any, max_tokens: Any) -> dict[str, Any]:
        """Lines of the indexed files matching a literal text or a regular expression."""
        text = pattern_arg(pattern)
        as_regex, folded = bool_arg("regex", regex, prefix=""), bool_arg("ignore_case", ignore_case, prefix="")
        chosen = SearchFilter.parse(path, lang, prefix="")
        budget = max_tokens_arg(max_tokens)
        files, generation = self.files()
        found = grep(files, text, regex=as_regex, ignore_case=folded, search_filter=chosen, limit=MAX_RESULTS)
        payload = {"pattern": text, "regex": as_regex, "generation": generation, **found.as_json()}
        return fit(payload, "files", budget, "narrow it with path or lang, or raise max_tokens")

    def outline(self, path: Any, max_tokens: Any) -> dict[str, Any]:
        """The definitions of one indexed file as a tree."""
        budget = max_tokens_arg(max_tokens)
        files, generation = self.files()
        shown = files.path_arg(path)
        files.files.text(shown)  # a file changed or swapped since it was indexed: refused, not outlined
        roots = outline(files.index, shown)
        payload = {"path": shown, "generation": generation, "definitions": [r.as_json() for r in roots]}
        return fit(payload, "definitions", budget, "raise max_tokens to see the rest of the file's definitions")


def register(
    server: MCPServer,
    tools: AgentTools,
    annotations: ToolAnnotations,
    call: Callable[[Callable[[], dict[str, Any]]], dict[str, Any]],
) -> None:
    """Add the tools to the MCP ``server`` (``call`` runs a tool's work, turning user errors into tool errors)."""

    @server.tool(annotations=annotations)
    def find_definitions(name: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
        """Find every definition of a name (class, function, method, type, constant, module) in the repository.

        Returns definitions best first (exact case, then kind: class, type, function, method, ...; code
        outside tests first), each with path, first_line/last_line (1-based), kind, signature and the
        names it is nested in. Args: name: an identifier, plain or qualified (LLMEngine,
        vllm.LLMEngine, absl::flat_hash_map). max_tokens: budget of the response (100..100000,
        default 2000); the last definitions are left out first, and `omitted` says how many.
        """
        return call(lambda: tools.find_definitions(name, max_tokens))

    @server.tool(annotations=annotations)
    def find_references(
        name: str, path: list[str] | None = None, lang: str | None = None, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> dict[str, Any]:
        """Find every occurrence of an identifier (whole word) in the indexed files, grouped by file.

        Each file lists its occurrences under `code`, `comment`, `string` (as the file's parser tells
        them apart) or `text` (files without a parser), each with line, column and the line's text.
        Args: name: the identifier. path: only files matching any of these globs. lang: only files of
        one language. max_tokens: budget (100..100000, default 2000); whole files are left out first.
        """
        return call(lambda: tools.find_references(name, path, lang, max_tokens))

    @server.tool(annotations=annotations)
    def grep(
        pattern: str,
        regex: bool = False,
        ignore_case: bool = False,
        path: list[str] | None = None,
        lang: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> dict[str, Any]:
        """Exact search: the lines of the indexed files holding a literal text (or, with regex, matching a
        regular expression in the Rust regex crate's syntax, as ripgrep), grouped by file with line numbers.

        Args: pattern: the text or expression (one line). regex: read pattern as a regular expression.
        ignore_case: match regardless of case. path: only files matching any of these globs. lang: only
        files of one language. max_tokens: budget (100..100000, default 2000); the last files go first.
        """
        return call(lambda: tools.grep(pattern, regex, ignore_case, path, lang, max_tokens))

    @server.tool(annotations=annotations)
    def outline(path: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
        """The definitions of one indexed file as a tree: classes with their methods, and so on, with lines.

        Args: path: the file as search results name it (or relative to the repository). max_tokens:
        budget (100..100000, default 2000).
        """
        return call(lambda: tools.outline(path, max_tokens))
