"""Worker processes that never outlive the process that started them.

:func:`worker_pool` is a :class:`~concurrent.futures.ProcessPoolExecutor` whose workers

- die with their parent, however it dies (``kill -9`` included): on Linux the kernel sends them
  ``SIGKILL`` when the parent exits (``PR_SET_PDEATHSIG``); everywhere, a thread in each worker
  also watches its parent and exits when it is gone (within :data:`PARENT_POLL_S`);
- ignore Ctrl-C: the terminal sends ``SIGINT`` to the whole process group, and only the parent
  reacts. A worker starts with ``SIGINT`` held back (blocked while the parent starts it, a mask the
  worker inherits: :class:`HeldPool`), so that Ctrl-C while it is still importing cannot print a
  traceback; its initializer then ignores the signal and lets it through. When the parent leaves the
  pool on an exception (``KeyboardInterrupt`` included), the queued work is cancelled and the workers
  stop once the batch each holds is done (:func:`stop`).

Stopping workers under cancelled work can make the executor's own management thread fail: before
Python 3.12 it marks every pending future broken without skipping the cancelled ones, and the
``InvalidStateError`` it raises would print a traceback after "fastrag: interrupted". That one
exception, from that one place, is dropped (:func:`_quiet_cancelled_race`); nothing else is.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
#: Whether this platform has per-thread signal masks (POSIX): without them a worker starts unmasked.
SIGNAL_MASKS = hasattr(signal, "pthread_sigmask")
#: ``prctl`` option: the signal a process gets when its parent exits (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: How often a worker's watch thread checks that its parent is alive.
PARENT_POLL_S = 0.5
#: How long stopping waits for a terminated worker before killing it.
STOP_GRACE_S = 2.0


@contextmanager
def worker_pool(max_workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers die with this process; stopped at once when the block raises."""
    # forking copies only the calling thread: a lock another thread (a watcher, a server) holds at that
    # moment stays held in the worker for ever, so a process with other threads starts its workers fresh
    context = multiprocessing.get_context("spawn" if threading.active_count() > 1 else None)
    # fork and spawn start workers from this process; a fork server is their parent instead (and
    # exits when this process does), so the workers then watch the parent they start with
    parent = os.getpid() if context.get_start_method() != "forkserver" else 0
    pool = HeldPool(max_workers, mp_context=context, initializer=die_with_parent, initargs=(parent,))
    _install_quiet_race_hook()
    try:
        yield pool
    except BaseException:
        stop(pool)
        raise
    pool.shutdown(wait=True)


class HeldPool(ProcessPoolExecutor):
    """A process pool that starts its workers with ``SIGINT`` blocked (:func:`held_sigint`): the pool starts a
    worker inside :meth:`submit`, and the worker inherits the mask of the thread that starts it."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """:meth:`ProcessPoolExecutor.submit`, with ``SIGINT`` held back while it may start workers."""
        with held_sigint():
            return super().submit(fn, *args, **kwargs)


@contextmanager
def held_sigint() -> Iterator[None]:
    """``SIGINT`` blocked in this thread for the block, then let through: a Ctrl-C meanwhile is only delayed.
    A process started in the block begins with it blocked, so a Ctrl-C that reaches it before it ignores the
    signal stays pending instead of raising ``KeyboardInterrupt`` inside its imports."""
    if not SIGNAL_MASKS:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def die_with_parent(parent: int) -> None:
    """Worker initializer: ignore Ctrl-C, and exit when the parent process (pid ``parent``, 0: the
    current one) is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C held back since the start is dropped here
    if SIGNAL_MASKS:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
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
    """Cancel the queued work and end the workers: those still busy after :data:`STOP_GRACE_S` are terminated,
    then killed after as long again.

    The work already handed to a worker (one batch each) is let finish within the grace: a worker ended while
    it writes its result back leaves the pool's manager thread reading half a message for ever, and the
    interpreter's exit joins that thread, so Ctrl-C would print "interrupted" and never return.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    if manager is not None:
        manager.join(STOP_GRACE_S)  # it ends the workers itself once their last results are in
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    # left running, the manager can close its wake-up pipe while the interpreter's exit hook writes to it
    if manager is not None:
        manager.join(STOP_GRACE_S)


_EXECUTOR_FILE = os.path.join("concurrent", "futures", "process.py")
_hook_lock = threading.Lock()
_hook_installed = False


def _install_quiet_race_hook() -> None:
    """Put :func:`_quiet_cancelled_race` in front of the thread exception hook, once per process."""
    global _hook_installed
    with _hook_lock:
        if _hook_installed:
            return
        previous = threading.excepthook

        def hook(args: threading.ExceptHookArgs) -> None:
            if not _quiet_cancelled_race(args.exc_type, args.exc_traceback):
                previous(args)

        threading.excepthook = hook
        _hook_installed = True


def _quiet_cancelled_race(exc_type: type[BaseException], tb: TracebackType | None) -> bool:
    """Whether a thread's exception is the executor's cancelled-future race (module docstring): an
    ``InvalidStateError`` raised inside ``concurrent/futures/process.py``."""
    if exc_type is not InvalidStateError:
        return False
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(_EXECUTOR_FILE):
            return True
        tb = tb.tb_next
    return False
