"""Exact search on the indexed files of the live generation: literal or regular-expression matches with
line numbers, found by the native core (``fastrag._core.grep_files``, the Rust ``regex`` crate, as
ripgrep's ``rg -n`` reports them).

Which files are searched: the index's files, narrowed by ``--path`` / ``--lang`` as ``search`` narrows
them. No index prefilter: reading the files and running the crate's literal prefilters over them costs
less than looking the pattern's tokens up would save on one search (``benches/grep.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastrag import _core
from fastrag.errors import UsageError
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
    every matching line and of the files with one."""

    matches: list[tuple[str, int, str]]
    total: int
    files_matched: int
    files_searched: int

    def as_json(self) -> dict[str, Any]:
        """Matches grouped by file: ``{"files": [{"path", "lines": [{"line", "text"}]}], ...}``."""
        files: list[dict[str, Any]] = []
        for path, line, text in self.matches:
            if not files or files[-1]["path"] != path:
                files.append({"path": path, "lines": []})
            files[-1]["lines"].append({"line": line, "text": text})
        return {"total": self.total, "files_matched": self.files_matched, "files_searched": self.files_searched,
                "files": files}  # fmt: skip


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
        found, total, matched, _ = _core.grep_files(
            [str(files.locate(p)) for p in chosen], pattern, not regex, ignore_case, limit, LINE_CHARS
        )
    except ValueError as exc:
        raise UsageError(f"invalid regular expression {pattern!r}: {exc}") from None
    return GrepResult([(chosen[i], line, text) for i, line, text in found], total, matched, len(chosen))
