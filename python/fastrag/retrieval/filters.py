"""Search filters: which files a search may return, as the core's candidate mask.

A filter is a set of path globs (any may match) and a language (see :mod:`fastrag.indexing.languages`).
It becomes one byte per chunk (:meth:`SearchFilter.mask`), nonzero where the chunk's file passes;
BM25 and the vector search skip the other chunks while ranking, so a filtered search costs what an
unfiltered one does. Masks are cached per index, so a repeated filter costs a dictionary lookup.

Globs are matched against the file's path relative to the indexed repository (``docs/**``,
``vllm/**/*.py``) and against the path as results show it (``data/raw/vllm-0.10.1/docs/**``):

* ``**`` matches any run of characters, ``/`` included (``a/**/b`` also matches ``a/b``);
* ``*`` and ``?`` match within one path segment; ``[...]`` is a character class (an unclosed ``[``
  is an error);
* a glob without ``/`` matches the file name at any depth (``*.rs``); a glob ending in ``/``
  matches everything below that folder (``docs/`` is ``docs/**``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from fastrag.errors import UsageError
from fastrag.indexing.generations import LoadedIndex
from fastrag.indexing.languages import Language, is_language, language_arg
from fastrag.indexing.sources import Sources

#: Globs one search accepts, and the longest glob.
MAX_GLOBS = 32
MAX_GLOB_CHARS = 512
#: Masks kept per index.
MASK_CACHE = 64


@lru_cache(maxsize=1024)
def glob_regex(glob: str) -> re.Pattern[str]:
    """The regular expression a glob stands for (see the module docstring)."""
    given = glob
    if glob.endswith("/"):
        glob += "**"
    if "/" not in glob:
        glob = "**/" + glob
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (close := glob.find("]", i + 2 if glob.startswith("[!", i) else i + 1)) > i:
            body = glob[i + 1 : close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = close + 1
        elif c == "[":  # never closed: a typo, not a file name (a literal bracket is spelt [[])
            raise UsageError(f"bad path glob {given!r}: a '[' is never closed (a literal '[' is '[[]')")
        else:
            out.append(re.escape(c))
            i += 1
    try:
        return re.compile("".join(out) + r"\Z", re.DOTALL)
    except re.error as exc:
        raise UsageError(f"bad path glob {glob!r}: {exc}") from None


def globs_arg(value: object, *, prefix: str = "--") -> tuple[str, ...]:
    """``--path`` values: one glob or a list of them (``None``: no path filter)."""
    if value is None:
        return ()
    items: Iterable[object] = value if isinstance(value, (list, tuple)) else [value]
    globs: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise UsageError(f"{prefix}path needs a glob such as 'docs/**' or '*.py', got {item!r}")
        if len(item) > MAX_GLOB_CHARS or "\x00" in item:
            raise UsageError(f"{prefix}path glob is too long or holds a NUL character: {item[:40]!r}")
        glob = item.strip().removeprefix("./")
        glob_regex(glob)  # a bad class is reported now
        globs.append(glob)
    if len(globs) > MAX_GLOBS:
        raise UsageError(f"{prefix}path: at most {MAX_GLOBS} globs, got {len(globs)}")
    return tuple(globs)


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which files a search may return: any of ``globs`` (none: every path) and ``lang`` (``None``: any)."""

    globs: tuple[str, ...] = ()
    lang: Language | None = None

    @classmethod
    def parse(cls, path: object = None, lang: object = None, *, prefix: str = "--") -> SearchFilter:
        """The filter of ``--path`` (one glob or several) and ``--lang``, checked (:class:`UsageError`)."""
        return cls(globs_arg(path, prefix=prefix), None if lang is None else language_arg(lang, prefix=prefix))

    def __bool__(self) -> bool:
        return bool(self.globs) or self.lang is not None

    def as_json(self) -> dict[str, Any]:
        """The filter as JSON: ``{"path": [globs], "lang": name or null}``."""
        return {"path": list(self.globs), "lang": self.lang.name if self.lang else None}

    def accepts(self, path: str, relative: str) -> bool:
        """Whether a file passes: ``path`` as results show it, ``relative`` to the indexed repository."""
        if self.lang is not None and not is_language(self.lang, relative):
            return False
        if not self.globs:
            return True
        return any(glob_regex(g).match(relative) or glob_regex(g).match(path) for g in self.globs)

    def mask(self, index: LoadedIndex) -> bytes | None:
        """One byte per chunk of ``index``, 1 where its file passes; ``None`` for no filter (cached per index)."""
        if not self:
            return None
        cache: dict[SearchFilter, bytes] = index._lazy.setdefault("filter_masks", {})
        found = cache.get(self)
        if found is not None:
            return found
        with _LOCK:
            root = Sources.of(index.manifest)
            files = np.fromiter(
                (self.accepts(p, root.relative(p) or p) for p in index.chunks.paths),
                dtype=np.uint8,
                count=len(index.chunks.paths),
            )
            file_of = index._lazy.get("file_of")
            if file_of is None:
                file_of = index._lazy["file_of"] = np.asarray(index.chunks.file, dtype=np.int64)
            mask = files[file_of].tobytes() if len(files) else bytes(len(index.chunks))
            if len(cache) >= MASK_CACHE:
                cache.pop(next(iter(cache)))
            cache[self] = mask
        return mask


_LOCK = threading.Lock()
#: Every file.
NO_FILTER = SearchFilter()
