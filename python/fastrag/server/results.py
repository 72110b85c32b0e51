"""Search responses: hits with their text and line range, as JSON, kept in an LRU cache.

The cache maps ``(query, k, mode, filter, generation)`` to the encoded response, so a repeated search costs a
dictionary lookup; it is emptied when the live index changes (the generation is part of the key too,
so a response of an older index can never be served).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from fastrag.retrieval.filters import NO_FILTER, SearchFilter
from fastrag.retrieval.retriever import Hit, clean_query
from fastrag.server.cache import LruCache
from fastrag.server.live import Live, LiveIndex
from fastrag.server.texts import SourceTexts

#: Search responses kept.
CACHE_SIZE = 256


def encode(payload: Any) -> bytes:
    """JSON bytes (UTF-8; lone surrogates, which UTF-8 cannot carry, as ``\\u`` escapes)."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode("ascii")


class SearchResults:
    """Runs searches on the live index and renders them, with an LRU cache of recent responses."""

    def __init__(self, live: LiveIndex, texts: SourceTexts, cache_size: int = CACHE_SIZE) -> None:
        self.live = live
        self.texts = texts
        self.cache: LruCache[tuple[str, int, str, SearchFilter, str], bytes] = LruCache(cache_size)
        self._generation: str | None = None
        self._lock = threading.Lock()

    def current(self) -> Live:
        """The live generation; caches are emptied when it changed since the last request."""
        live = self.live.current()
        if live.generation != self._generation:
            with self._lock:
                if live.generation != self._generation:
                    self.cache.clear()
                    self.texts.clear()
                    self._generation = live.generation
        return live

    def search(self, query: str, k: int, mode: str, search_filter: SearchFilter = NO_FILTER) -> tuple[bytes, bool]:
        """The JSON response for a search (of the files ``search_filter`` accepts) and whether it was cached."""
        live = self.current()
        cleaned = clean_query(query)  # the search reads only this: equal cleaned texts share one cached answer
        key = (cleaned, k, mode, search_filter, live.generation)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, True
        hits = live.search(query, k, mode, search_filter)  # cleaned there as every caller's query is, once
        body = encode(
            {
                "query": cleaned,
                "searched": live.retriever.searched(query),
                "k": k,
                "mode": mode,
                "filter": search_filter.as_json(),
                "generation": live.generation,
                "results": [self.result(rank, hit) for rank, hit in enumerate(hits, 1)],
            }
        )
        self.cache.put(key, body)
        return body, False

    def result(self, rank: int, hit: Hit) -> dict[str, Any]:
        """One hit as JSON: the spec's source fields, score, line range and text (``null`` when unreadable)."""
        found = self.texts.get(hit.file_path)
        first, last = found.lines(hit.start, hit.end) if found is not None else (None, None)
        return {
            "rank": rank,
            "file_path": hit.file_path,
            "first_character_index": hit.start,
            "last_character_index": hit.end,
            "score": round(hit.score, 4),
            "first_line": first,
            "last_line": last,
            "text": found.text[hit.start : hit.end] if found is not None else None,
        }
