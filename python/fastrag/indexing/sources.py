"""Where an indexed file lies on disk, whatever the working directory.

Results name a file as ``<display root>/<path in the repository>``: the display root is the repository
as ``index`` was given it, relative to the directory it ran in when below it (``data/raw/vllm-0.10.1``
from the project root), else absolute. Every generation's manifest also records the repository's
absolute root (``repo_path``), and everything that reads an indexed file resolves its result path
through it, so that searches, answers and the server read the right file from any directory. A path
that does not start with the display root (a results file made elsewhere) is read as written.

A sharded index (``index --repos``) has one root per shard: its display root is the shard's name, its
repository root the shard's repository (:class:`Sources`, from the merged manifest's shard list).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrag.indexing.generations import SHARDS_KEY


def display_path(display_root: str, rel_path: str) -> str:
    """How results name the file ``rel_path`` of a repository shown as ``display_root``."""
    return f"{display_root}/{rel_path}" if display_root else rel_path


def repository_name(manifest: Mapping[str, Any]) -> str | None:
    """The repository an index serves, as a person names it: its display root (``data/raw/vllm-0.10.1``), else the
    folder's name (``rich`` for a repository indexed into its own ``.fastrag/``); ``None`` for a sharded index."""
    if manifest.get(SHARDS_KEY):
        return None
    shown, repo = manifest.get("display_root"), manifest.get("repo_path")
    if isinstance(shown, str) and shown:
        return shown
    return Path(repo).name if isinstance(repo, str) and repo else None


@dataclass(frozen=True, slots=True)
class SourceRoot:
    """How one index names its files (``display_root``) and where they are (``repo_root``, absolute)."""

    display_root: str
    repo_root: Path | None

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> SourceRoot:
        """The roots a generation's manifest records (no ``repo_root`` when it has none)."""
        shown, repo = manifest.get("display_root"), manifest.get("repo_path")
        return cls(shown if isinstance(shown, str) else "", Path(repo) if isinstance(repo, str) and repo else None)

    def relative(self, file_path: str) -> str | None:
        """The path inside the repository of the file shown as ``file_path``; ``None`` when not one of its files."""
        if not self.display_root:
            return None if Path(file_path).is_absolute() else file_path
        prefix = self.display_root.rstrip("/") + "/"
        return file_path[len(prefix) :] if file_path.startswith(prefix) else None

    def locate(self, file_path: str) -> Path:
        """Where the file shown as ``file_path`` is: under the recorded root, else ``file_path`` as written."""
        rel = self.relative(file_path) if self.repo_root is not None else None
        return self.repo_root / rel if self.repo_root is not None and rel is not None else Path(file_path)


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the files of a loaded index are: one :class:`SourceRoot`, or one per shard of a sharded index.

    A shard's display root is its name (no ``/``, names unique), so at most one root claims a path.
    """

    roots: tuple[SourceRoot, ...]

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> Sources:
        """The roots of a loaded index's manifest: its shards' (:data:`SHARDS_KEY`) when it has shards."""
        shards = manifest.get(SHARDS_KEY)
        if isinstance(shards, list):
            return cls(tuple(SourceRoot.of(s) for s in shards if isinstance(s, Mapping)))
        return cls((SourceRoot.of(manifest),))

    @property
    def repo_roots(self) -> list[Path]:
        """The repositories' absolute roots (those recorded)."""
        return [r.repo_root for r in self.roots if r.repo_root is not None]

    def root_of(self, file_path: str) -> SourceRoot | None:
        """The root that names ``file_path``, or ``None`` when none does."""
        return next((r for r in self.roots if r.relative(file_path) is not None), None)

    def relative(self, file_path: str) -> str | None:
        """The path of ``file_path`` inside its repository; ``None`` when no root names it."""
        root = self.root_of(file_path)
        return root.relative(file_path) if root is not None else None

    def locate(self, file_path: str) -> Path:
        """Where the file shown as ``file_path`` is: under its root's repository, else ``file_path`` as written."""
        root = self.root_of(file_path)
        return root.locate(file_path) if root is not None else Path(file_path)
