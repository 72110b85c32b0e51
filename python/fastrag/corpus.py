"""Which files of a repository are indexed, how they are read, and their fingerprints."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

#: Suffixes of the text files a user would want to search.
TEXT_SUFFIXES = frozenset(
    {
        ".py", ".pyi", ".md", ".markdown", ".rst", ".txt",
        ".toml", ".cfg", ".ini", ".yaml", ".yml", ".sh",
        ".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".cuh", ".cmake", ".jinja",
    }
)  # fmt: skip
#: Files indexed by their full name whatever their suffix.
TEXT_NAMES = frozenset({"CMakeLists.txt", "Dockerfile", "Makefile", "requirements.txt"})
#: Directories never descended into: version control, caches, virtual environments, builds.
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
     ".tox", ".venv", "venv", "node_modules", "build", "dist", ".eggs", "site-packages"}
)  # fmt: skip
#: Files above this size are skipped (generated data, not prose or code).
MAX_FILE_BYTES = 4 * 1024 * 1024
#: A NUL byte in this many leading bytes marks a binary file.
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A candidate file: its path relative to the repository root and its cheap fingerprint."""

    rel_path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file that was not indexed, and why."""

    rel_path: str
    reason: str


def is_indexed_name(name: str) -> bool:
    """Whether a file name is one fastrag indexes."""
    return name in TEXT_NAMES or os.path.splitext(name)[1].lower() in TEXT_SUFFIXES


def walk(root: Path) -> tuple[list[FileEntry], list[Skipped]]:
    """List the indexable regular files under ``root``, sorted by relative path.

    Symbolic links are not followed (no loops, nothing outside the tree); hidden and build
    directories are skipped; files too large to be source are reported as skipped.
    """
    entries: list[FileEntry] = []
    skipped: list[Skipped] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
        base = os.path.relpath(dirpath, root)
        for name in filenames:
            if not is_indexed_name(name):
                continue
            rel = name if base == "." else f"{base}/{name}".replace(os.sep, "/")
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError as exc:
                skipped.append(Skipped(rel, exc.strerror or "unreadable"))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > MAX_FILE_BYTES:
                skipped.append(Skipped(rel, f"larger than {MAX_FILE_BYTES // 2**20} MiB"))
                continue
            entries.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
    entries.sort(key=lambda e: e.rel_path)
    return entries, skipped


def decode(data: bytes) -> str | None:
    """Decode a file's bytes as UTF-8, or ``None`` for binary or non-UTF-8 content.

    No newline translation: offsets must be those of the file decoded as UTF-8.
    """
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def content_hash(data: bytes) -> str:
    """A short, collision-safe fingerprint of a file's content."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()
