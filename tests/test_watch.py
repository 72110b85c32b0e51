"""Always fresh: the watcher turns each burst of file changes into one incremental build."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from conftest import SAMPLE_FILES, write_repo
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import current_generation, load_index
from fastrag.indexing.watch import Watcher, _indexed_change


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> float:
    """Seconds until ``condition()`` holds; fails after ``timeout``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(0.02)
    return time.monotonic() - started


def indexed_text(index_dir: Path, needle: str) -> bool:
    """Whether a chunk of the live generation holds ``needle`` (read through its recorded repository)."""
    index = load_index(index_dir)
    repo = Path(index.manifest["repo_path"])
    for i in range(len(index.chunks)):
        path, start, end = index.chunks.span(i)
        rel = path.removeprefix("repo/")
        if needle in (repo / rel).read_text()[start:end]:
            return True
    return False


def test_edits_bursts_and_failures(tmp_path: Path) -> None:
    """An edit is indexed once the burst is over; 200 new files are one build; a failed build (every file
    gone) leaves the previous generation live and the watcher running."""
    repo = write_repo(tmp_path / "repo")
    params = IndexParams(embed="none")
    build_index(repo, tmp_path / "index", params, display_root="repo", progress=False)
    watcher = Watcher.of_index(tmp_path / "index", debounce_ms=100).start()
    try:
        wait_for(lambda: watcher.status()["watching"])
        time.sleep(0.3)  # the watch is armed
        (repo / "pkg/engine.py").write_text(SAMPLE_FILES["pkg/engine.py"] + "\nFRESH_MARKER = 1\n")
        wait_for(lambda: indexed_text(tmp_path / "index", "FRESH_MARKER"))
        wait_for(lambda: watcher.builds == 1)  # counted once the publication is done
        assert watcher.status()["pending_count"] == 0

        before = watcher.builds
        for i in range(200):  # a checkout: many files at once
            (repo / f"gen/mod_{i}.py").parent.mkdir(exist_ok=True)
            (repo / f"gen/mod_{i}.py").write_text(f"def generated_{i}():\n    return {i}\n")
        wait_for(lambda: load_index(tmp_path / "index").manifest["files"] == len(SAMPLE_FILES) + 200)
        time.sleep(0.5)
        assert watcher.builds - before == 1
        assert watcher.status()["seconds_since_build"] is not None and watcher.last_error is None

        live = current_generation(tmp_path / "index")
        for path in list(repo.rglob("*")):
            if path.is_file():
                path.unlink()
        wait_for(lambda: watcher.last_error is not None)
        assert "no indexable files" in str(watcher.last_error)
        assert current_generation(tmp_path / "index") == live  # the previous index stays live
        (repo / "back.py").write_text("def back():\n    pass\n")
        wait_for(lambda: watcher.last_error is None and load_index(tmp_path / "index").manifest["files"] == 1)
    finally:
        watcher.stop()
    assert not watcher.status()["watching"]


def test_changes_that_matter(tmp_path: Path) -> None:
    """Hidden folders, skipped folders and files kept out whatever their content do not start a build."""
    repo = tmp_path
    assert _indexed_change(repo, str(repo / "src/a.py"))
    assert not _indexed_change(repo, str(repo / ".git/index"))
    assert not _indexed_change(repo, str(repo / ".fastrag/index/CURRENT"))
    assert not _indexed_change(repo, str(repo / "node_modules/x/a.js"))
    assert not _indexed_change(repo, str(repo / "uv.lock"))
    assert not _indexed_change(repo, "/elsewhere/a.py")
