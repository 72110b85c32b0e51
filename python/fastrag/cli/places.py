"""Where a command's repository and index are when its flags do not say (:mod:`fastrag.workspace`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastrag.arguments import path_arg
from fastrag.cli.flags import status
from fastrag.errors import UsageError

if TYPE_CHECKING:
    from fastrag.indexing.reading import IndexedFiles

from fastrag.workspace import (
    PROJECT_INDEX_DIR,
    STATE_DIR,
    Workspace,
    default_index_note,
    index_dir_default,
    mark_state_dir,
)

#: How ``--help`` names the defaults of ``--index_dir`` and ``--repo_path``.
INDEX_DIR_HELP = "default: data/processed in fastrag's checkout, else <repository>/.fastrag/index"
REPO_PATH_HELP = "default: data/raw/vllm-0.10.1 in fastrag's checkout, else the repository the working directory is in"


def index_arg(index_dir: Any) -> Path:
    """``--index_dir`` of a command that reads an index: as given, else the workspace's (saying on stderr,
    in one line, when that index is probably not the one meant: :func:`~fastrag.workspace.default_index_note`)."""
    if index_dir is not None:
        return path_arg("index_dir", index_dir)
    folder = index_dir_default(None)
    note = default_index_note(folder)
    if note:
        status(note)
    return folder


def output_arg(name: str, save_directory: Any, default: Path) -> Path:
    """``--save_directory`` of a command that writes a dataset's output: as given; else ``default`` (relative to
    the working directory) in fastrag's checkout, and ``<repository>/.fastrag/<default without data/>`` in a
    repository, which fastrag writes nothing into but ``.fastrag/``."""
    if save_directory is not None:
        return path_arg(name, save_directory)
    workspace = Workspace.detect()
    if workspace.project or workspace.root is None:
        return default
    return workspace.root / STATE_DIR / default.relative_to(PROJECT_INDEX_DIR.parent)


def repo_and_index(repo_path: Any, index_dir: Any) -> tuple[Path, Path, str | None]:
    """What ``index`` builds: the repository, the index folder and the display root of the results'
    paths (``None``: the repository as given, relative to the working directory; ``""``: paths
    relative to the repository, for the per-repository index)."""
    target = path_arg("index_dir", index_dir) if index_dir is not None else index_dir_default(None, repo_path)
    if repo_path is not None:
        return path_arg("repo_path", repo_path), target, None
    workspace = Workspace.detect()
    if workspace.project or workspace.root is None:
        return workspace.repo_path, target, None
    return workspace.root, target, ""


def served_index(index_dir: Any, repo_path: Any) -> Path:
    """The index ``mcp`` serves: ``--index_dir`` as given; else the index of ``--repo_path``'s repository
    (or of the working directory's), ``<repository>/.fastrag/index``, built on first use with progress on
    stderr (in fastrag's checkout: ``data/processed``, never built here)."""
    from fastrag.indexing.generations import current_generation
    from fastrag.workspace import INDEX_SUBDIR, repository_root

    if index_dir is not None:
        return index_arg(index_dir)
    if repo_path is not None:
        start = path_arg("repo_path", repo_path)
        if not start.is_dir():
            raise UsageError(f"repository path {start} is not a directory")
        root = repository_root(start) or Path(os.path.abspath(start))
        folder = root / STATE_DIR / INDEX_SUBDIR
    else:
        workspace = Workspace.detect()
        if workspace.project or workspace.root is None:
            return index_arg(None)
        root, folder = workspace.root, workspace.index_dir
    if current_generation(folder) is None:
        status(f"fastrag: no index of {root} yet: indexing it into {folder}")
        build_until_searchable(root, folder)
        mark_state_dir(folder)
    return folder


def build_until_searchable(root: Path, folder: Path) -> None:
    """Index ``root`` into ``folder`` and return once a generation is live: with vectors to embed, the build
    goes on in a background thread, its end (or error: the lexical generation stays live) said on stderr,
    while the caller serves the lexical generation (the server follows the next one as it follows any)."""
    import threading

    from fastrag.errors import UserError
    from fastrag.indexing.builder import build_index
    from fastrag.indexing.records import IndexReport

    live = threading.Event()
    lock = threading.Lock()
    done: list[IndexReport | BaseException] = []
    background: list[bool] = []  # set once the caller has gone on serving: the thread says how it ended

    def work() -> None:
        outcome: IndexReport | BaseException
        try:
            outcome = build_index(root, folder, display_root="", on_lexical=lambda _: live.set())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, or said on stderr
            outcome = exc
        with lock:
            done.append(outcome)
            live.set()
            tell = bool(background)
        if tell and isinstance(outcome, IndexReport):
            status(f"fastrag: vectors ready: {outcome.vectors} chunks ({outcome.embed_seconds:.1f} s)")
        elif tell and isinstance(outcome, UserError):
            status(f"fastrag: error: {outcome}")

    thread = threading.Thread(target=work, name="fastrag-index", daemon=True)
    thread.start()
    live.wait()
    with lock:
        if not done:
            background.append(True)
    if background:
        status("fastrag: searchable now (lexical); embedding the vectors in the background")
        return
    thread.join()
    outcome = done[0]
    if isinstance(outcome, BaseException):
        raise outcome
    status(f"fastrag: indexed {outcome.files} files into {outcome.chunks} chunks in {outcome.seconds:.1f} s")


class IndexTexts:
    """The texts of the files the index in ``index_dir`` names, read as indexed (from any working directory,
    :class:`~fastrag.indexing.reading.IndexedFiles`; the index opened on the first call): ``None`` for a file
    (or an index) that cannot be read. Called as ``texts(path)``."""

    def __init__(self, index_dir: Path) -> None:
        self._index_dir = index_dir
        self._files: IndexedFiles | None = None

    def __call__(self, path: str) -> str | None:
        """The text of the file results name ``path``; ``None`` when it (or the index) cannot be read."""
        from fastrag.errors import UserError
        from fastrag.indexing.catalog import open_index
        from fastrag.indexing.reading import IndexedFiles

        try:
            if self._files is None:
                self._files = IndexedFiles(open_index(self._index_dir))
            return self._files.text(path)
        except UserError:
            return None
