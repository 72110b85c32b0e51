"""The flat-combining batcher: concurrent calls share batches, get their own rows and their own errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import numpy as np
import pytest

from fastrag.retrieval.batching import Combiner

#: No call of these tests may take longer: a hang fails the test instead of blocking the suite.
TIMEOUT_S = 30

R = TypeVar("R")


def start(fn: Callable[..., R], *args: object) -> Future[R]:
    """``fn(*args)`` on a daemon thread: a caller stuck for good cannot keep the test run alive."""
    future: Future[R] = Future()

    def target() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the test through the future
            future.set_exception(exc)

    threading.Thread(target=target, daemon=True).start()
    return future


class Recorder:
    """A batch function that doubles numbers, records its batches and never runs on two threads at once."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.gate = gate  # when set up, the first batch waits for it
        self.active = 0
        self.overlaps = 0
        self._lock = threading.Lock()

    def __call__(self, items: list[int]) -> np.ndarray:
        with self._lock:
            self.active += 1
            self.overlaps += self.active > 1
            first = not self.batches
            self.batches.append(list(items))
        if first and self.gate is not None:
            assert self.gate.wait(TIMEOUT_S)
        if any(item < 0 for item in items):
            with self._lock:
                self.active -= 1
            raise ValueError(f"negative item in {sorted(items)}")
        time.sleep(0.0005)
        with self._lock:
            self.active -= 1
        return np.array([[2 * item, item] for item in items], dtype=np.int64).reshape(len(items), 2)


def wait_pending(combiner: Combiner[int], n: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while len(combiner._pending) < n:
        assert time.monotonic() < deadline, "callers never queued up"
        time.sleep(0.001)


def test_a_caller_alone_runs_at_once() -> None:
    run = Recorder()
    combiner = Combiner(run)
    assert combiner([3, 4]).tolist() == [[6, 3], [8, 4]]
    assert combiner([]).shape == (0, 2)
    assert run.batches == [[3, 4], []] and (combiner.batches, combiner.items) == (2, 2)


def test_callers_that_arrive_during_a_batch_share_the_next_one() -> None:
    gate = threading.Event()
    run = Recorder(gate)
    combiner = Combiner(run)
    first = start(combiner, [100])
    while not run.batches:
        time.sleep(0.001)
    rest = {n: start(combiner, [n, n + 1000]) for n in range(1, 8)}
    wait_pending(combiner, 7)
    gate.set()
    assert first.result(TIMEOUT_S).tolist() == [[200, 100]]
    for n, future in rest.items():
        assert future.result(TIMEOUT_S).tolist() == [[2 * n, n], [2 * (n + 1000), n + 1000]]
    assert run.batches[0] == [100] and len(run.batches) == 2
    assert sorted(run.batches[1]) == sorted(x for n in range(1, 8) for x in (n, n + 1000))
    assert run.overlaps == 0


def test_an_error_reaches_only_the_callers_whose_items_raise_it() -> None:
    gate = threading.Event()
    run = Recorder(gate)
    combiner = Combiner(run)
    first = start(combiner, [-1])
    while not run.batches:
        time.sleep(0.001)
    calls = {n: start(combiner, [n]) for n in (5, -6, 7, -8)}
    wait_pending(combiner, 4)
    gate.set()
    with pytest.raises(ValueError, match=r"\[-1\]"):
        first.result(TIMEOUT_S)
    assert calls[5].result(TIMEOUT_S).tolist() == [[10, 5]]
    assert calls[7].result(TIMEOUT_S).tolist() == [[14, 7]]
    for n in (-6, -8):
        with pytest.raises(ValueError, match=rf"\[{n}\]"):  # its own items, not the whole batch's
            calls[n].result(TIMEOUT_S)
    assert sorted(run.batches[1]) == [-8, -6, 5, 7]  # tried together first, then each alone
    assert combiner([9]).tolist() == [[18, 9]]  # and the combiner still works


def test_a_wrong_row_count_is_an_error() -> None:
    combiner: Combiner[int] = Combiner(lambda items: np.zeros((len(items) + 1, 2)))
    with pytest.raises(ValueError, match="3 rows for 2 items"):
        combiner([1, 2])


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt inside the batch function."""


def test_an_interrupted_batch_answers_every_caller() -> None:
    gate = threading.Event()
    run = Recorder(gate)

    def interrupted(items: list[int]) -> np.ndarray:
        out = run(items)
        if 13 in items:
            raise Interrupt()
        return out

    combiner = Combiner(interrupted)
    first = start(combiner, [1])
    while not run.batches:
        time.sleep(0.001)
    lead, other = start(combiner, [13]), start(combiner, [2])
    wait_pending(combiner, 2)
    gate.set()
    assert first.result(TIMEOUT_S).tolist() == [[2, 1]]
    outcomes = []
    for future in (lead, other):
        try:
            future.result(TIMEOUT_S)
            outcomes.append("rows")
        except Interrupt:
            outcomes.append("interrupt")
        except RuntimeError as exc:
            assert "interrupted" in str(exc)
            outcomes.append("told")
    assert sorted(outcomes) == ["interrupt", "told"]  # the runner sees the interrupt, the other is told
    assert combiner([4]).tolist() == [[8, 4]]


def test_many_threads_never_lose_a_call_or_overlap_batches() -> None:
    run = Recorder()
    combiner = Combiner(run)

    def caller(worker: int) -> bool:
        for i in range(150):
            items = [worker * 10_000 + i * 10 + j for j in range(i % 3 + 1)]
            if combiner(items).tolist() != [[2 * x, x] for x in items]:
                return False
        return True

    futures = [start(caller, w) for w in range(16)]
    assert all(f.result(TIMEOUT_S) for f in futures)
    assert run.overlaps == 0 and combiner.items == sum(150 // 3 * 6 for _ in range(16))
    assert combiner.batches < 16 * 150  # some calls were batched together
    assert not combiner._pending and not combiner._running
