"""Exact search on the indexed files of the live generation: literal or regular-expression matches with
line numbers, found by the native core (``fastrag._core.grep_texts``, the Rust ``regex`` crate, as
ripgrep's ``rg -n`` reports them) in the texts :class:`~fastrag.retrieval.lookup.IndexFiles` reads (as
indexed: a file swapped for a link or changed since is refused, and reported, never searched).

Which files are searched: the index's files, narrowed by ``--path`` / ``--lang`` as ``search`` narrows
them. No index prefilter: reading the files and running the crate's literal prefilters over them costs
less than looking the pattern's tokens up would save on one search (``benches/grep.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastrag import _core
from fastrag.errors import UsageError
from fastrag.indexing.corpus import Skipped
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.lookup import IndexFiles

__all__ = ["MAX_PATTERN_CHARS", "GrepResult", "grep"]

#: Longest pattern accepted.
MAX_PATTERN_CHARS = 1000
#: Characters of a matching line kept.
LINE_CHARS = 300


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Matching lines, in file order: ``(path as results name it, 1-based line, text)``; the count of
    every matching line and of the files with one; the files that could not be read (not searched)."""

    matches: list[tuple[str, int, str]]
    total: int
    files_matched: int
    files_searched: int
    unreadable: list[Skipped] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Matches grouped by file: ``{"files": [{"path", "lines": [{"line", "text"}]}], ...}``."""
        files: list[dict[str, Any]] = []
        for path, line, text in self.matches:
            if not files or files[-1]["path"] != path:
                files.append({"path": path, "lines": []})
            files[-1]["lines"].append({"line": line, "text": text})
        return {"total": self.total, "files_matched": self.files_matched, "files_searched": self.files_searched,
                **unreadable_json(self.unreadable), "files": files}  # fmt: skip


def pattern_arg(value: Any, *, prefix: str = "") -> str:
    """A grep pattern: text, not empty, at most :data:`MAX_PATTERN_CHARS` characters."""
    if not isinstance(value, str):
        raise UsageError(f"{prefix}the pattern must be text, got {value!r}")
    if not value:
        raise UsageError(f"{prefix}the pattern is empty")
    if len(value) > MAX_PATTERN_CHARS or "\n" in value:
        raise UsageError(f"{prefix}the pattern must be one line of at most {MAX_PATTERN_CHARS} characters")
    return value


def grep(
    files: IndexFiles,
    pattern: str,
    *,
    regex: bool = False,
    ignore_case: bool = False,
    search_filter: SearchFilter | None = None,
    limit: int = 1000,
) -> GrepResult:
    """The lines of the indexed ``files`` (those ``search_filter`` accepts) that match ``pattern``: a
    literal text, or with ``regex`` a regular expression (:class:`UsageError` when it is invalid)."""
    chosen = files.chosen(search_filter) if search_filter is not None else files.paths
    try:
        _core.grep_texts([], pattern, not regex, ignore_case)  # an invalid pattern fails before any read
    except ValueError as exc:
        raise UsageError(f"invalid regular expression {pattern!r}: {exc}") from None
    read = [(path, text) for path in chosen if (text := files.read(path)) is not None]
    found, total, matched = _core.grep_texts([t for _, t in read], pattern, not regex, ignore_case, limit, LINE_CHARS)
    matches = [(read[i][0], line, text) for i, line, text in found]
    return GrepResult(matches, total, matched, len(read), files.refused_among(chosen))


def unreadable_json(skipped: list[Skipped], shown: int = 10) -> dict[str, Any]:
    """What a tool's reply says of the files it could not read: ``{}`` when none, else their count and the
    first ``shown`` (path relative to its repository, and why)."""
    if not skipped:
        return {}
    first = [{"path": s.rel_path, "reason": s.reason} for s in skipped[:shown]]
    return {"unreadable": len(skipped), "unreadable_files": first}
