"""A small thread-safe LRU cache (recent search responses, file texts)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

KeyT = TypeVar("KeyT", bound=Hashable)
ValueT = TypeVar("ValueT")


def _one(_: object) -> int:
    return 1


class LruCache(Generic[KeyT, ValueT]):
    """Entries whose total weight stays within ``capacity``; the least recently used go first.

    ``weigh`` gives an entry's weight (default 1: ``capacity`` counts entries). Reading an entry makes it
    the most recent. An entry heavier than the whole capacity is not kept.
    """

    def __init__(self, capacity: int, weigh: Callable[[ValueT], int] = _one) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._weigh = weigh
        self._weight = 0
        self._entries: OrderedDict[KeyT, tuple[ValueT, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: KeyT) -> ValueT | None:
        """The value stored under ``key`` (now the most recent), or ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: KeyT, value: ValueT) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entries beyond the capacity."""
        weight = self._weigh(value)
        if weight > self.capacity:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            self._entries[key] = (value, weight)
            self._weight += weight
            while self._weight > self.capacity:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._weight -= dropped

    def clear(self) -> None:
        """Drop every entry (the counters are kept)."""
        with self._lock:
            self._entries.clear()
            self._weight = 0

    @property
    def weight(self) -> int:
        """Total weight of the entries held."""
        return self._weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
