"""What BM25 indexes for every span: the texts of the chunk index and of the heading-line index."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from fastrag.config import HEADING_BODY_SIZE
from fastrag.indexing.chunking import Chunk
from fastrag.indexing.corpus import read_indexed_text
from fastrag.indexing.records import FileRecord
from fastrag.indexing.sources import display_path

__all__ = ["indexed_texts", "with_body"]


def indexed_texts(
    repo_path: Path, records: Iterable[FileRecord], prefix: str = "", heading_body: int = HEADING_BODY_SIZE
) -> tuple[list[str], list[str]]:
    """The texts BM25 indexes for every chunk and for every heading line: relative path (below
    ``prefix``, if any), context, then the span itself (for a heading line, with the start of its
    section: ``heading_body`` characters at most, :func:`with_body`)."""
    docs: list[str] = []
    heading_docs: list[str] = []
    for record in records:
        text = read_indexed_text(repo_path / record.rel_path, record.digest)
        shown = display_path(prefix, record.rel_path)
        docs.extend(f"{shown}\n{c.context}\n{text[c.start : c.end]}" for c in record.chunks)
        sections = with_body(record.headings, heading_body)
        heading_docs.extend(f"{shown}\n{c.context}\n{text[c.start : end]}" for c, end in sections)
    return docs, heading_docs


def with_body(headings: list[Chunk], size: int) -> Iterator[tuple[Chunk, int]]:
    """Each heading line (sorted by start) with the end of what is indexed for it: the line and
    then its section's text up to the next heading or anchor line, at most ``size`` characters
    after the line. A question that asks which page or section covers something names what the
    section says, not only its title (benches/RESULTS.md, "Cross-validation")."""
    for n, line in enumerate(headings):
        following = headings[n + 1].start if n + 1 < len(headings) else line.end + size
        yield line, max(line.end, min(following, line.end + size))
