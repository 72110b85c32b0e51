"""Flat combining: calls that arrive together run as one batch, on whichever thread is free.

A :class:`Combiner` wraps a batch function that must not run on two threads at once and costs
less per item in batches — the query embedder, which reuses its inference requests and embeds a
query in ~3.3 ms alone but ~1.4 ms in a batch of four (benches/RESULTS.md, "HTTP server load").

A caller adds its items to a pending list. When no batch is running it becomes the runner at
once (a caller alone waits for nobody: no timer, no added latency); otherwise it waits. The
runner takes its own items and every pending call, runs them as one batch, gives each caller its
rows and returns. If calls arrived meanwhile, it first promotes the oldest of them to run the next
batch, which takes all calls pending by then. The pending list and the running flag change only
under one lock, so every waiting call is in exactly one future batch: no call is ever lost.

When a batch fails, each of its calls is run again alone, so an exception reaches exactly the
callers whose items raise it, and the others still get their rows. This relies on what the batch
function must guarantee anyway: an item's row does not depend on the other items of the batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class _Call(Generic[T]):
    """One caller's items, and then its rows or its exception."""

    __slots__ = ("done", "error", "items", "leads", "rows")

    def __init__(self, items: list[T]) -> None:
        self.items = items
        self.done = threading.Event()  # set when rows or error is ready, or when promoted to run
        self.leads = False
        self.rows: np.ndarray | None = None
        self.error: BaseException | None = None

    def result(self) -> np.ndarray:
        """The rows, or raise the exception."""
        if self.error is not None:
            raise self.error
        assert self.rows is not None
        return self.rows


class Combiner(Generic[T]):
    """Runs ``run`` on the items of concurrent calls together; one batch at a time.

    ``run`` maps a list of items to an array with one row per item, and an item's row must not
    depend on the other items of the list. Thread-safe; :meth:`__call__` is the only entry point.
    """

    def __init__(self, run: Callable[[list[T]], np.ndarray]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._pending: deque[_Call[T]] = deque()
        self._running = False
        #: Calls of ``run`` so far and the items they took (the tests read them).
        self.batches = 0
        self.items = 0

    def __call__(self, items: Sequence[T]) -> np.ndarray:
        """The rows of ``items``, computed in a batch with the items of concurrent calls."""
        call = _Call(list(items))
        with self._lock:
            if self._running:
                self._pending.append(call)
            else:
                self._running = call.leads = True
        if not call.leads:
            call.done.wait()
            if not call.leads:  # answered by the runner of a batch it was part of
                return call.result()
        self._lead(call)
        return call.result()

    def _lead(self, own: _Call[T]) -> None:
        """Run ``own`` with every pending call, answer them all, hand over to the next caller if any."""
        with self._lock:
            batch = [own, *self._pending]
            self._pending.clear()
        try:
            self._answer(batch)
        finally:
            for call in batch:
                if call.rows is None and call.error is None:  # only after a BaseException in ``run``
                    call.error = RuntimeError("the batch these items were part of was interrupted")
            with self._lock:
                successor = self._pending.popleft() if self._pending else None
                if successor is None:
                    self._running = False
                else:
                    successor.leads = True
            for call in batch[1:]:
                call.done.set()
            if successor is not None:
                successor.done.set()

    def _answer(self, batch: list[_Call[T]]) -> None:
        """Fill in the rows of every call of ``batch``: one ``run``, or one per call if that fails."""
        items = [item for call in batch for item in call.items]
        try:
            rows = self._checked(items)
        except Exception as exc:  # noqa: BLE001 - each call is retried alone; its own error reaches it
            if len(batch) == 1:
                batch[0].error = exc
                return
            for call in batch:
                try:
                    call.rows = self._checked(call.items)
                except Exception as own_exc:  # noqa: BLE001 - handed to the caller whose items raised it
                    call.error = own_exc
            return
        lo = 0
        for call in batch:
            call.rows = rows[lo : lo + len(call.items)]
            lo += len(call.items)

    def _checked(self, items: list[T]) -> np.ndarray:
        """``run(items)``, counted, with one row per item."""
        rows = self._run(items)
        self.batches += 1
        self.items += len(items)
        if len(rows) != len(items):
            raise ValueError(f"the batch function returned {len(rows)} rows for {len(items)} items")
        return rows
