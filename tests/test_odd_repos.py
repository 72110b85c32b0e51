"""Odd repositories (issue 7, item 6): ``index`` never crashes, hangs or balloons on them.

Symbolic-link loops and links out of the tree, dangling links, FIFOs, unreadable files and
directories, a 200 MB file, binary and non-UTF-8 files with text names, files that change while
the index is built, and 20 000 tiny files. Each repository is indexed by the real command line;
every skipped file is accounted for in one ``skipped N files: ...`` line on stderr, peak memory
(of the indexer and its workers, from ``wait4``) stays bounded, and nothing outside the
repository ends up in the index.

Tests run as root in CI, where ``chmod 000`` does not stop a read: the unreadable cases run the
indexer without the capabilities that let root read any file (``CAP_DAC_OVERRIDE`` and
``CAP_DAC_READ_SEARCH`` dropped from its bounding set before ``exec``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import CliResult, write_repo
from fastrag.errors import UserError
from fastrag.indexing import corpus
from fastrag.indexing.corpus import NOT_REGULAR, SYMLINK, TOO_LARGE, FileChanged, read_indexed_text, read_source
from fastrag.indexing.generations import load_index

#: The sample repository's files, as the index names them.
SAMPLE = ["repo/docs/install.md", "repo/docs/lora.md", "repo/pkg/engine.py", "repo/pkg/sampling.py"]
#: A word that exists only outside the repository: it must never be indexed.
SECRET = "zanzibarquokka"
#: Peak RSS of ``index`` on the sample repository is about 35 MB; a 200 MB file read into memory
#: would push it past this bound by far.
MEMORY_BOUND_MB = 150
BINARY = "binary or not UTF-8"

#: ``python -c UNPRIVILEGED PROGRAM ARGS...`` runs PROGRAM without root's right to read any file:
#: ``CAP_DAC_OVERRIDE`` (1) and ``CAP_DAC_READ_SEARCH`` (2) leave the bounding set
#: (``prctl(PR_CAPBSET_DROP)``), so the ``exec`` ed program never gets them and file modes apply
#: to it as to anyone. Not root (no ``CAP_SETPCAP``): the calls fail harmlessly, modes apply anyway.
UNPRIVILEGED = """
import ctypes, os, sys
libc = ctypes.CDLL(None)
for cap in (1, 2):
    libc.prctl(24, cap, 0, 0, 0)
os.execv(sys.argv[1], sys.argv[1:])
"""


#: Forks the command from a fresh, small interpreter and writes the child's peak RSS (KB) to
#: argv[1]. A child forked straight from pytest would report pytest's own high-water mark:
#: Linux carries the resident-set peak across fork and exec.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as handle:
    handle.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class Measured:
    """A finished run: its output, peak resident memory (MB, workers included) and duration."""

    result: CliResult
    peak_mb: float
    seconds: float


def run_measured(
    *args: str,
    cwd: Path,
    timeout: float = 120,
    unprivileged: bool = False,
    script: Path | None = None,
    env: dict[str, str] | None = None,
) -> Measured:
    """Run ``python -m fastrag ARGS`` (or ``python SCRIPT ARGS``, or either :data:`UNPRIVILEGED`).

    ``os.wait4`` reports the largest resident set of the process and of every descendant it
    waited for (the chunking workers). A run still going after ``timeout`` seconds is killed
    with its process group and fails the test: a hang is a bug here.
    """
    command = [sys.executable, *(["-m", "fastrag"] if script is None else [str(script)]), *args]
    if unprivileged:
        command = [sys.executable, "-c", UNPRIVILEGED, *command]
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    rss_file = Path(tempfile.mkdtemp()) / "peak_kb"
    command = [sys.executable, "-c", LAUNCHER, str(rss_file), *command]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err, env=full_env, start_new_session=True)
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        result = CliResult(proc.returncode, out.read().decode(), err.read().decode())
    if expired.is_set():
        pytest.fail(f"{' '.join(args)} still running after {timeout} s (stderr: {result.err[-500:]!r})")
    peak_kb = int(rss_file.read_text()) if rss_file.exists() else usage.ru_maxrss
    return Measured(result, peak_kb / 1024, seconds)


def index_cli(workdir: Path, timeout: float = 120, unprivileged: bool = False) -> Measured:
    """``fastrag index`` of ``workdir/repo`` (lexical only: the odd files are the point)."""
    return run_measured("index", "--repo_path", "repo", "--vectors", "none", cwd=workdir, timeout=timeout,
                        unprivileged=unprivileged)  # fmt: skip


def skipped_summary(result: CliResult) -> tuple[int, str]:
    """The count and text of the one ``skipped N files: ...`` line; checks there is one only."""
    assert "Traceback" not in result.err, result.err
    lines = [line for line in result.err.splitlines() if line.startswith("skipped ")]
    assert len(lines) == 1, result.err
    match = re.fullmatch(r"skipped (\d+) files: (.+)", lines[0])
    assert match, lines[0]
    return int(match.group(1)), match.group(2)


def indexed_paths(workdir: Path) -> set[str]:
    """Files that have chunks in the live index."""
    table = load_index(workdir / "data/processed").chunks
    return {table.paths[f] for f in set(table.file)}


def outside_secret(tmp_path: Path) -> Path:
    """A file and a directory outside the repository, holding :data:`SECRET`."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.py").write_text(f"def {SECRET}():\n    return 'must not be indexed'\n")
    return outside


# ------------------------------------------------------------------------ the static oddities


def test_symlink_loops_dangling_links_and_links_out_of_the_repo(workdir: Path) -> None:
    repo, outside = workdir / "repo", outside_secret(workdir)
    (repo / "pkg/loop").symlink_to("..", target_is_directory=True)  # pkg/loop/pkg/loop/...
    (repo / "self").symlink_to(repo, target_is_directory=True)
    (repo / "ext").symlink_to(outside, target_is_directory=True)
    (repo / "docs/gone.md").symlink_to("nowhere.md")  # dangling
    (repo / "leak.py").symlink_to(outside / "secret.py")
    (repo / "docs/alias.md").symlink_to("lora.md")  # inside the tree: its target is indexed anyway

    run = index_cli(workdir, timeout=60)
    assert run.result.code == 0, run.result.err
    count, text = skipped_summary(run.result)
    assert count == 3, text
    for rel in ("docs/alias.md", "docs/gone.md", "leak.py"):
        assert f"{rel} ({SYMLINK})" in text
    assert indexed_paths(workdir) == set(SAMPLE)
    search = run_measured("search", SECRET, cwd=workdir).result
    assert SECRET not in search.out


def test_fifo_is_reported_and_never_opened(workdir: Path) -> None:
    os.mkfifo(workdir / "repo/pkg/pipe.py")  # opening it for reading would wait for a writer
    run = index_cli(workdir, timeout=30)
    assert run.result.code == 0, run.result.err
    assert skipped_summary(run.result) == (1, f"pkg/pipe.py ({NOT_REGULAR})")
    assert indexed_paths(workdir) == set(SAMPLE)


def test_unreadable_file_and_directory(workdir: Path) -> None:
    repo = workdir / "repo"
    (repo / "pkg/secret.py").write_text(f"def {SECRET}(): pass\n")
    (repo / "private").mkdir()
    (repo / "private/notes.md").write_text(f"# {SECRET}\n")
    (repo / "pkg/secret.py").chmod(0)
    (repo / "private").chmod(0)
    try:
        read = [sys.executable, "-c", "import sys; open(sys.argv[1]).read()", str(repo / "pkg/secret.py")]
        probe = subprocess.run([sys.executable, "-c", UNPRIVILEGED, *read], capture_output=True, check=False)
        assert probe.returncode != 0, "the file is still readable: this test cannot make it unreadable"
        run = index_cli(workdir, unprivileged=True)
    finally:
        (repo / "private").chmod(0o755)
        (repo / "pkg/secret.py").chmod(0o644)
    assert run.result.code == 0, run.result.err
    count, text = skipped_summary(run.result)
    assert count == 2, text
    assert "pkg/secret.py (Permission denied)" in text and "private/ (Permission denied)" in text
    assert indexed_paths(workdir) == set(SAMPLE)


def test_200_mb_file_is_skipped_without_being_read(workdir: Path) -> None:
    with open(workdir / "repo/pkg/huge.py", "wb") as f:
        f.truncate(200 * 2**20)  # sparse: instant, no disk used; reading it would allocate 200 MB
    run = index_cli(workdir)
    assert run.result.code == 0, run.result.err
    assert skipped_summary(run.result) == (1, f"pkg/huge.py ({TOO_LARGE})")
    assert run.peak_mb < MEMORY_BOUND_MB, f"peak RSS {run.peak_mb:.0f} MB"


def test_binary_and_non_utf8_files_with_text_names(workdir: Path) -> None:
    repo = workdir / "repo"
    (repo / "docs/logo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (repo / "pkg/tool.py").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(2048))
    (repo / "docs/utf16.txt").write_text("UTF-16 text has NUL bytes", encoding="utf-16")
    (repo / "pkg/latin1.py").write_bytes("# caf\xe9 cr\xe8me\nx = 1\n".encode("latin-1"))  # no NUL, invalid UTF-8
    (repo / "docs/truncated.rst").write_bytes("fin tronqu\xe9e \u2603".encode()[:-1])  # cut mid-character
    (repo / "docs/bom_crlf.md").write_bytes("\ufeff# Windows notes\r\n\r\nCarriage\rreturns\r\n".encode())  # valid
    (repo / "pkg/control.py").write_bytes(b"x = '\x01\x02\x1b[0m'\n")  # odd but valid UTF-8: indexed

    run = index_cli(workdir)
    assert run.result.code == 0, run.result.err
    count, text = skipped_summary(run.result)
    assert count == 5, text
    assert text.count(f"({BINARY})") == 3 and text.endswith(f"and 2 more ({BINARY}: 5)")
    assert indexed_paths(workdir) == set(SAMPLE) | {"repo/docs/bom_crlf.md", "repo/pkg/control.py"}
    hits = run_measured("search", "How are Windows carriage returns handled?", "--k", "1", cwd=workdir).result
    assert "repo/docs/bom_crlf.md" in hits.out


def test_all_oddities_at_once_give_one_summary_line(workdir: Path) -> None:
    repo, outside = workdir / "repo", outside_secret(workdir)
    (repo / "loop").symlink_to(".", target_is_directory=True)
    (repo / "ext").symlink_to(outside, target_is_directory=True)
    (repo / "leak.py").symlink_to(outside / "secret.py")
    os.mkfifo(repo / "fifo.md")
    (repo / "blob.txt").write_bytes(b"\x00" * 64)
    with open(repo / "huge.txt", "wb") as f:
        f.truncate(200 * 2**20)
    (repo / "node_modules").mkdir()  # skipped directory: not even walked, not reported
    (repo / "node_modules/dep.py").write_text(f"{SECRET} = 1\n")

    run = index_cli(workdir, timeout=60)
    assert run.result.code == 0, run.result.err
    count, text = skipped_summary(run.result)
    assert count == 4 and "and 1 more (" in text and f"{BINARY}: 1" in text, text
    assert run.peak_mb < MEMORY_BOUND_MB, f"peak RSS {run.peak_mb:.0f} MB"
    assert indexed_paths(workdir) == set(SAMPLE)


def test_many_tiny_files(tmp_path: Path) -> None:
    """100 000 one-function files in 100 directories: indexed whole, in bounded memory, searchable."""
    n, per_dir = 100_000, 1000
    repo = tmp_path / "repo"
    for i in range(n):
        folder = repo / f"d{i // per_dir:03d}"
        if i % per_dir == 0:
            folder.mkdir(parents=True)
        (folder / f"m{i}.py").write_bytes(f"def tiny_{i}():\n    return {i}\n".encode())
    run = index_cli(tmp_path, timeout=600)  # a hang fails the test; the time itself is not asserted
    assert run.result.code == 0, run.result.err
    assert f"indexed {n} files into {n} chunks" in run.result.out
    assert "skipped" not in run.result.err
    assert run.peak_mb < 1024, f"peak RSS {run.peak_mb:.0f} MB"
    hits = run_measured("search", "tiny_12345", "--k", "1", cwd=tmp_path).result
    assert hits.out.split()[1].startswith("repo/d012/m12345.py:"), hits.out


# ------------------------------------------------------------------ files changing mid-index

#: Run ``python -m fastrag`` with one file changed at a chosen moment of ``index``: right after
#: the walk (before the file is read) or right after chunking (before the chunks' text is read
#: again for BM25). The change is described by ``FASTRAG_TEST_CHANGE`` (JSON).
CHANGE_HOOK = """
import json, os, runpy, sys
from pathlib import Path

import fastrag.indexing.builder as index

stage, action, rel, arg = json.loads(os.environ["FASTRAG_TEST_CHANGE"])


def change(repo):
    path = Path(repo) / rel
    if action == "delete":
        path.unlink()
    elif action == "truncate":
        path.write_bytes(path.read_bytes()[: int(arg)])
    elif action == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif action == "grow":
        with open(path, "r+b") as f:
            f.truncate(int(arg))
    elif action == "symlink":
        path.unlink()
        path.symlink_to(arg)
    elif action == "rewrite":
        path.write_bytes(arg.encode("latin-1"))


if stage == "walk":
    walk = index.walk

    def changing_walk(root, *args, **kwargs):
        found = walk(root, *args, **kwargs)
        change(root)
        return found

    index.walk = changing_walk
else:
    chunk_files = index._chunk_files

    def changing_chunk_files(repo_path, *args, **kwargs):
        yield from chunk_files(repo_path, *args, **kwargs)
        change(repo_path)

    index._chunk_files = changing_chunk_files
sys.argv[0] = "fastrag"
runpy.run_module("fastrag", run_name="__main__", alter_sys=True)
"""


def index_with_change(workdir: Path, stage: str, action: str, rel: str, arg: object = None,
                      timeout: float = 60) -> Measured:  # fmt: skip
    """``index`` of ``workdir/repo`` with ``rel`` changed by ``action`` after ``stage``."""
    hook = workdir / "change_hook.py"
    hook.write_text(CHANGE_HOOK)
    env = {"FASTRAG_TEST_CHANGE": json.dumps([stage, action, rel, arg])}
    return run_measured("index", "--repo_path", "repo", "--vectors", "none", cwd=workdir, script=hook,
                        env=env, timeout=timeout)  # fmt: skip


def test_file_deleted_after_the_walk_is_reported(workdir: Path) -> None:
    run = index_with_change(workdir, "walk", "delete", "pkg/engine.py")
    assert run.result.code == 0, run.result.err
    assert skipped_summary(run.result) == (1, "pkg/engine.py (No such file or directory)")
    assert indexed_paths(workdir) == set(SAMPLE) - {"repo/pkg/engine.py"}


def test_file_truncated_after_the_walk_is_indexed_as_read(workdir: Path) -> None:
    run = index_with_change(workdir, "walk", "truncate", "docs/lora.md", 60)
    assert run.result.code == 0, run.result.err
    assert "skipped" not in run.result.err
    table = load_index(workdir / "data/processed").chunks
    text = (workdir / "repo/docs/lora.md").read_text()
    spans = [table.span(c) for c in range(len(table)) if table.span(c)[0] == "repo/docs/lora.md"]
    assert spans and all(0 <= s < e <= len(text) == 60 for _, s, e in spans)


@pytest.mark.parametrize(
    ("action", "arg", "reason", "timeout"),
    [
        ("fifo", None, NOT_REGULAR, 10),  # a plain read_bytes() waits forever for a writer
        ("grow", 200 * 2**20, TOO_LARGE, 60),  # a plain read_bytes() reads 200 MB into memory
        ("symlink", "../../outside/secret.py", SYMLINK, 60),  # a plain read_bytes() indexes a file outside
    ],
)
def test_file_replaced_after_the_walk_is_skipped_safely(
    workdir: Path, action: str, arg: object, reason: str, timeout: float
) -> None:
    outside_secret(workdir)
    run = index_with_change(workdir, "walk", action, "pkg/engine.py", arg, timeout=timeout)
    assert run.result.code == 0, run.result.err
    assert skipped_summary(run.result) == (1, f"pkg/engine.py ({reason})")
    assert run.peak_mb < MEMORY_BOUND_MB, f"peak RSS {run.peak_mb:.0f} MB"
    assert indexed_paths(workdir) == set(SAMPLE) - {"repo/pkg/engine.py"}
    assert SECRET not in run_measured("search", SECRET, cwd=workdir).result.out


@pytest.mark.parametrize(
    ("action", "arg"),
    [
        ("delete", None),  # an unchecked re-read: FileNotFoundError traceback
        ("rewrite", "# caf\xe9\n"),  # not UTF-8 any more: UnicodeDecodeError traceback
        ("rewrite", "# short\n"),  # valid but shorter: stale chunk offsets, silently
    ],
)
def test_file_changed_after_chunking_keeps_the_previous_index(workdir: Path, action: str, arg: object) -> None:
    assert index_cli(workdir).result.code == 0
    before = load_index(workdir / "data/processed").path
    (workdir / "repo/docs/new.md").write_text("# New page\n\nSomething to index again.\n")
    run = index_with_change(workdir, "chunk", action, "docs/lora.md", arg)
    assert "Traceback" not in run.result.err, run.result.err
    errors = [line for line in run.result.err_lines if not line.startswith("chunking:")]  # progress bars aside
    assert run.result.code == 1 and len(errors) == 1, run.result.err
    assert errors[0].startswith("fastrag: error: ") and "docs/lora.md changed while being indexed" in errors[0]
    kept = load_index(workdir / "data/processed")
    assert kept.path == before  # the previous generation is still the live one
    assert "repo/docs/new.md" not in kept.chunks.paths  # nothing of the refused run was published


# ------------------------------------------------------------------- corpus.read_source itself


def test_read_source_refuses_what_the_walk_would_have_skipped(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "ok.py")
    (tmp_path / "dir.py").mkdir()
    assert read_source(tmp_path, "ok.py") == b"x = 1\n"
    with pytest.raises(OSError) as link:
        read_source(tmp_path, "link.py")
    assert link.value.strerror == SYMLINK
    with pytest.raises(OSError) as folder:
        read_source(tmp_path, "dir.py")
    assert folder.value.strerror == NOT_REGULAR
    with pytest.raises(FileNotFoundError):
        read_source(tmp_path, "missing.py")
    with pytest.raises(OSError) as big:
        read_source(tmp_path, "ok.py", max_bytes=5)
    assert big.value.strerror == TOO_LARGE


def test_read_source_does_not_wait_for_a_fifo_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_source(tmp_path, "pipe.md")
        except OSError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # unblock it, then fail
        os.close(os.open(tmp_path / "pipe.md", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_source blocked on a FIFO")
    assert [getattr(e, "strerror", None) for e in outcome] == [NOT_REGULAR]


def test_read_source_bounds_a_file_growing_after_fstat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size check and the read are not atomic: the read itself must stop at the bound."""
    path = tmp_path / "grows.py"
    path.write_bytes(b"x" * 100)
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        with open(path, "ab") as f:
            f.write(b"y" * 1000)
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_grow)  # the one read_source calls
    with pytest.raises(OSError) as grown:
        read_source(tmp_path, path.name, max_bytes=500)
    assert grown.value.strerror == TOO_LARGE


def test_read_indexed_text_checks_the_content_it_was_chunked_from(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("# Title\n\nBody.\n")
    digest = corpus.content_hash(path.read_bytes())
    assert read_indexed_text(tmp_path, path.name, digest) == "# Title\n\nBody.\n"
    path.write_text("# Title\n\nOther body.\n")
    with pytest.raises(FileChanged, match="changed while being indexed"):
        read_indexed_text(tmp_path, path.name, digest)
    path.unlink()
    with pytest.raises(UserError, match="No such file"):
        read_indexed_text(tmp_path, path.name, digest)


def test_walk_is_sorted_and_reports_special_files(tmp_path: Path) -> None:
    write_repo(tmp_path)
    os.mkfifo(tmp_path / "b.md")
    (tmp_path / "a.py").symlink_to("missing.py")
    entries, skipped = corpus.walk(tmp_path)
    assert [e.rel_path for e in entries] == sorted(p.removeprefix("repo/") for p in SAMPLE)
    assert [(s.rel_path, s.reason) for s in skipped] == [("a.py", SYMLINK), ("b.md", NOT_REGULAR)]
