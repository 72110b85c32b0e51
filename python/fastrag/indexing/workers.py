"""Worker processes that never outlive the process that started them.

:func:`worker_pool` is a :class:`~concurrent.futures.ProcessPoolExecutor` whose workers

- die with their parent, however it dies (``kill -9`` included): on Linux the kernel sends them
  ``SIGKILL`` when the parent exits (``PR_SET_PDEATHSIG``); everywhere, a thread in each worker
  also watches its parent and exits when it is gone (within :data:`PARENT_POLL_S`);
- ignore Ctrl-C: the terminal sends ``SIGINT`` to the whole process group, and only the parent
  reacts. When the parent leaves the pool on an exception (``KeyboardInterrupt`` included), the
  queued work is cancelled and the workers are stopped at once, not after the work already sent.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

#: ``prctl`` option: the signal a process gets when its parent exits (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: How often a worker's watch thread checks that its parent is alive.
PARENT_POLL_S = 0.5
#: How long stopping waits for a terminated worker before killing it.
STOP_GRACE_S = 2.0


@contextmanager
def worker_pool(max_workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers die with this process; stopped at once when the block raises."""
    context = multiprocessing.get_context()
    # fork and spawn start workers from this process; a fork server is their parent instead (and
    # exits when this process does), so the workers then watch the parent they start with
    parent = os.getpid() if context.get_start_method() != "forkserver" else 0
    pool = ProcessPoolExecutor(max_workers, mp_context=context, initializer=die_with_parent, initargs=(parent,))
    try:
        yield pool
    except BaseException:
        stop(pool)
        raise
    pool.shutdown(wait=True)


def die_with_parent(parent: int) -> None:
    """Worker initializer: ignore Ctrl-C, and exit when the parent process (pid ``parent``, 0: the
    current one) is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _arm_death_signal()
    watched = parent or os.getppid()
    if os.getppid() != watched:  # the parent died before the death signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(watched,), name="fastrag-parent-watch", daemon=True).start()


def _arm_death_signal() -> bool:
    """Have the kernel send ``SIGKILL`` to this process when its parent exits (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    """Exit this process as soon as ``parent`` is no longer its parent (it died: we were re-parented)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued work and end the workers now (terminate, then kill after :data:`STOP_GRACE_S`)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
