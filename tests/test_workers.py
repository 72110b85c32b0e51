"""The indexer's chunking workers die with it: ``kill -9`` of the indexer alone, or Ctrl-C.

Each test indexes a small repository, grows it so that the next ``index`` has thousands of files to
chunk in worker processes, and interrupts that run at a moment known to be inside the work: once its
progress line reports chunked files (the workers have started and returned results). Then no worker
may remain, and the previous index must still answer the same.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import InvalidStateError
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import run_cli, write_repo
from fastrag.indexing import workers as pool_workers

#: Files added for the interrupted run: a few seconds of chunking on 2 cores.
EXTRA_FILES = 2400
#: How long the workers may take to go once the indexer is gone (their parent watch polls every 0.5 s).
GONE_WITHIN_S = 5.0
WAIT_S = 120
PROGRESS = re.compile(r"chunking:.*?(\d+)/(\d+) \[")


def grow(root: Path, files: int = EXTRA_FILES) -> None:
    """Add ``files`` Python modules of about 6 KB each under ``root/gen``."""
    body = "".join(
        f"def function_{i}(value: int) -> int:\n    '''Step {i} of the pipeline.'''\n    return value + {i}\n\n"
        for i in range(80)
    )
    (root / "gen").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / "gen" / f"module_{i}.py").write_text(f"# module {i}\n{body}")


class Indexer:
    """``python -m fastrag index`` in its own session, its progress read from stderr as it comes."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastrag", "index", "--repo_path", "repo"],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: Ctrl-C is sent to the group, as a terminal does
        )
        self.err = ""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        while block := os.read(self.proc.stderr.fileno(), 4096):
            with self._lock:
                self.err += block.decode("utf-8", errors="replace")

    def progress(self) -> tuple[int, int]:
        """The last ``done/total`` of the chunking progress line, ``(0, 0)`` before it."""
        with self._lock:
            found = PROGRESS.findall(self.err.replace("\r", "\n"))
        return (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)

    def wait_chunked(self, fraction: float) -> tuple[int, int]:
        """Wait until at least one file, and ``fraction`` of them, are chunked; the indexer still running."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            done, total = self.progress()
            if total and done >= max(1, fraction * total):
                return done, total
            assert self.proc.poll() is None, f"the indexer ended before the marker: {self.err[-500:]!r}"
            time.sleep(0.01)
        pytest.fail(f"no progress marker within {WAIT_S} s: {self.err[-500:]!r}")

    def workers(self) -> list[psutil.Process]:
        """The indexer's child processes now."""
        children: list[psutil.Process] = psutil.Process(self.proc.pid).children(recursive=True)
        return children

    def finish(self) -> int:
        """The indexer's exit status, once its stderr is read (to its end, unless a leftover worker holds it)."""
        code = self.proc.wait(WAIT_S)
        self._reader.join(GONE_WITHIN_S)
        return code

    def cleanup(self) -> None:
        """Never leave a process behind, whatever the test's outcome."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait(WAIT_S)


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` that still run (a zombie waiting for init counts as gone)."""
    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def command_line(process: psutil.Process) -> list[str]:
    """The process's command line; empty once it is gone."""
    try:
        return list(process.cmdline())
    except psutil.NoSuchProcess:
        return []


def wait_gone(processes: list[psutil.Process], within: float = GONE_WITHIN_S) -> list[psutil.Process]:
    deadline = time.monotonic() + within
    while (alive := still_running(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


@pytest.fixture()
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A project with a small repository indexed; the search output before anything else happens."""
    write_repo(tmp_path / "repo")
    assert run_cli("index", "--repo_path", "repo", cwd=tmp_path).code == 0
    before = run_cli("search", "lora adapter", cwd=tmp_path)
    assert before.code == 0 and "repo/docs/lora.md" in before.out
    grow(tmp_path / "repo")
    yield tmp_path, before.out


@pytest.mark.parametrize("fraction", [0.0, 0.5], ids=["first-files-chunked", "half-chunked"])
def test_sigkill_of_the_indexer_leaves_no_worker(project: tuple[Path, str], fraction: float) -> None:
    cwd, before = project
    indexer = Indexer(cwd)
    try:
        done, total = indexer.wait_chunked(fraction)
        workers = indexer.workers()
        assert workers, "the indexer has no worker processes"
        os.kill(indexer.proc.pid, signal.SIGKILL)  # the indexer alone, as `kill -9 PID` does
        assert indexer.finish() == -signal.SIGKILL
        left = wait_gone(workers)
        assert not left, f"workers left {GONE_WITHIN_S} s after the kill at {done}/{total}: {[p.pid for p in left]}"
    finally:
        indexer.cleanup()
    after = run_cli("search", "lora adapter", cwd=cwd)
    assert after.code == 0 and after.out == before  # the previous index, untouched


def test_ctrl_c_stops_the_indexer_and_its_workers_with_one_line(project: tuple[Path, str]) -> None:
    cwd, before = project
    indexer = Indexer(cwd)
    try:
        indexer.wait_chunked(0.0)
        children = indexer.workers()
        # multiprocessing's resource tracker is no worker: it exits when the indexer closes its pipe by exiting
        trackers = [p for p in children if any("resource_tracker" in part for part in command_line(p))]
        workers = [p for p in children if p not in trackers]
        assert workers
        os.killpg(indexer.proc.pid, signal.SIGINT)  # what Ctrl-C does: SIGINT to the whole foreground group
        code = indexer.finish()
        assert not still_running(workers)  # stopped before the indexer exits, not after
        assert not wait_gone(trackers)
    finally:
        indexer.cleanup()
    assert code == 130, (code, indexer.err[-1000:])
    lines = [line for line in re.split(r"[\r\n]", indexer.err) if line.strip() and not PROGRESS.search(line)]
    assert lines[1:] == ["fastrag: interrupted"], indexer.err[-2000:]
    assert re.fullmatch(r"fastrag: \d+ files under repo, \d+ to read", lines[0]), lines  # said before the work
    after = run_cli("search", "lora adapter", cwd=cwd)
    assert after.code == 0 and after.out == before


def _thread_failure(filename: str, exc: BaseException) -> threading.ExceptHookArgs:
    """The hook arguments of ``exc`` raised by code that lives in ``filename``, in a thread."""
    code = compile("def fail(exc):\n    raise exc\n", filename, "exec")
    space: dict[str, object] = {}
    exec(code, space)  # noqa: S102 - a function whose frames name ``filename``, as the executor's do
    try:
        space["fail"](exc)  # type: ignore[operator]
    except BaseException as raised:  # noqa: BLE001 - whatever it is, it is the one handed to the hook
        return threading.ExceptHookArgs([type(raised), raised, raised.__traceback__, threading.current_thread()])
    raise AssertionError("not raised")


def test_only_the_executors_cancelled_future_race_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Python 3.12 the pool's management thread can raise ``InvalidStateError`` on a cancelled
    future while workers are stopped (Ctrl-C): that exception from ``concurrent/futures/process.py``
    is dropped; the same exception elsewhere, and any other, still reach the previous hook."""
    seen: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_type))
    monkeypatch.setattr(pool_workers, "_hook_installed", False)
    with pool_workers.worker_pool(1):
        pass
    executor = os.path.join(os.path.dirname(concurrent.futures.__file__), "process.py")
    threading.excepthook(_thread_failure(executor, InvalidStateError("CANCELLED: <Future>")))
    assert seen == []
    threading.excepthook(_thread_failure("/app/mine.py", InvalidStateError("elsewhere")))
    threading.excepthook(_thread_failure(executor, RuntimeError("another failure")))
    assert seen == [InvalidStateError, RuntimeError]
    with pool_workers.worker_pool(1):  # installed once: the previous hook is not wrapped twice
        pass
    threading.excepthook(_thread_failure("/app/mine.py", ValueError("x")))
    assert seen == [InvalidStateError, RuntimeError, ValueError]


def test_stopping_lets_the_work_handed_out_finish_within_the_grace() -> None:
    """A worker ended while it writes its result back leaves the pool's manager thread reading half a
    message for ever, and the interpreter's exit joins that thread: a Ctrl-C that printed "interrupted"
    and never returned. So the work already handed out may finish first, and the workers leave on their own."""
    with pool_workers.worker_pool(2) as pool:
        running = [pool.submit(time.sleep, 0.5) for _ in range(2)]
        queued = [pool.submit(time.sleep, 0.5) for _ in range(40)]
        processes = list(pool._processes.values())  # the workers' exit codes are the evidence
        manager = getattr(pool, "_executor_manager_thread", None)
        time.sleep(0.2)
        pool_workers.stop(pool)
    assert all(f.done() and not f.cancelled() for f in running)
    assert sum(f.cancelled() for f in queued) >= 30  # the queue is dropped, not worked through
    assert [p.exitcode for p in processes] == [0] * len(processes)  # left on their own, none terminated
    assert manager is not None and not manager.is_alive()  # nothing left for the exit to join


def test_stopping_ends_the_work_that_outlives_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_workers, "STOP_GRACE_S", 0.5)
    with pool_workers.worker_pool(1) as pool:
        stuck = pool.submit(time.sleep, 60.0)
        processes = list(pool._processes.values())
        time.sleep(0.2)
        started = time.monotonic()
        pool_workers.stop(pool)
    assert time.monotonic() - started < 10
    assert [p.exitcode for p in processes] == [-signal.SIGTERM] and stuck.done()


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks on this platform")
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_worker_starts_with_ctrl_c_held_back(method: str) -> None:
    """Ctrl-C reaches every process of the group, a worker still importing its modules included: before its
    initializer ignores ``SIGINT``, Python's own handler would raise ``KeyboardInterrupt`` there and print a
    traceback under "fastrag: interrupted". A process started under :func:`held_sigint` begins with the signal
    blocked, so a ``SIGINT`` it gets first stays pending; one started without it dies of it."""
    context: Any = multiprocessing.get_context(method)  # a concrete context: it has Process
    interrupted = context.Process(target=signal.raise_signal, args=(signal.SIGINT,))
    kept = context.Process(target=signal.raise_signal, args=(signal.SIGINT,))
    interrupted.start()
    with pool_workers.held_sigint():
        kept.start()
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the parent's mask is restored
    for process in (interrupted, kept):
        process.join(60)
    assert interrupted.exitcode != 0  # KeyboardInterrupt raised at once
    assert kept.exitcode == 0  # held back, never delivered


def test_the_pool_starts_its_workers_with_ctrl_c_held_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool starts its workers inside ``submit``: each start happens under :func:`held_sigint`."""
    depth: list[int] = [0]
    starts: list[int] = []
    held = pool_workers.held_sigint

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        depth[0] += 1
        try:
            with held():
                yield
        finally:
            depth[0] -= 1

    def start(self: multiprocessing.process.BaseProcess) -> None:
        starts.append(depth[0])
        original(self)

    original = multiprocessing.process.BaseProcess.start
    monkeypatch.setattr(pool_workers, "held_sigint", counted)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    with pool_workers.worker_pool(2) as pool:
        assert list(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
    assert starts and all(d == 1 for d in starts), starts


def test_a_pool_worker_ignores_ctrl_c_once_started() -> None:
    """Once its initializer has run, a worker ignores ``SIGINT`` and no longer holds it back."""
    with pool_workers.worker_pool(1) as pool:
        handler = pool.submit(signal.getsignal, signal.SIGINT).result(60)
        blocked = pool.submit(signal.pthread_sigmask, signal.SIG_BLOCK, []).result(60)
    assert handler == signal.SIG_IGN
    assert signal.SIGINT not in blocked
