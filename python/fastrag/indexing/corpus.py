"""Which files of a repository are indexed, how they are read, and their fingerprints.

Users point fastrag at any tree: symbolic links (loops, dangling, or leading out of the tree),
FIFOs and devices, files too large to be source, files that change or vanish while the index
is built. The walk never follows a link or opens anything; :func:`read_source` opens a file
without following a link or blocking, and never reads more than :data:`MAX_FILE_BYTES`.
Everything passed over is reported as a :class:`Skipped` with a short reason.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastrag.errors import UserError
from fastrag.indexing.ignores import Ignores
from fastrag.indexing.languages import HIDDEN, is_listed, kept_out

#: Directories never descended into: version control, caches, virtual environments, builds.
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
     ".tox", ".venv", "venv", "node_modules", "build", "dist", ".eggs", "site-packages"}
)  # fmt: skip
#: Files above this size are skipped (generated data, not prose or code).
MAX_FILE_BYTES = 4 * 1024 * 1024
#: A NUL byte in this many leading bytes marks a binary file.
BINARY_SNIFF_BYTES = 8192

#: A line this long (characters) with under :data:`GENERATED_SPACE` of whitespace is generated content:
#: a minified bundle, a source map's mappings, base64 data. Prose on one line (vLLM's 18,286-character
#: test prompt) has a space every few words; a long test literal (9,016 emoji) is shorter.
GENERATED_LINE = 16384
GENERATED_SPACE = 0.05

#: Reasons shown in the ``skipped N files`` summary.
SYMLINK = "symbolic link, not followed"
NOT_REGULAR = "not a regular file"
TOO_LARGE = f"larger than {MAX_FILE_BYTES // 2**20} MiB"
BINARY = "binary or not UTF-8"
EMPTY = "empty"
GENERATED = f"minified or generated (a line of over {GENERATED_LINE} characters, almost no spaces)"
#: Skipped files named in the summary line before "and N more".
SHOWN_SKIPPED = 3
#: A line of over :data:`GENERATED_LINE` characters, tried at line starts only: unanchored, every position
#: of a short line was tried in turn (5x slower on a 150 KB shell script).
_LONG_LINE = re.compile(f"(?m)^[^\n]{{{GENERATED_LINE + 1},}}")
#: How :func:`read_source` opens a file: never through a final symbolic link, never waiting for
#: a writer (a FIFO swapped in after the walk), never inherited by a child process.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


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


def walk(
    root: Path, ignore: bool = True, on_file: Callable[[], object] | None = None
) -> tuple[list[FileEntry], list[Skipped]]:
    """List the candidate regular files under ``root``, sorted by relative path.

    Symbolic links are not followed (no loops, nothing outside the tree); hidden and build
    directories, and hidden files no language lists, are passed over. Files and folders left out
    by ignore files (``ignore``: see :mod:`fastrag.indexing.ignores`), files kept out by name (lock
    files, minified bundles, source maps, data formats: :data:`fastrag.indexing.languages.KEPT_OUT`),
    symbolic links, special files (FIFOs, sockets, devices), files unreadable to ``lstat`` or too
    large to be source, directories that cannot be listed, and ignore patterns that cannot be
    applied, are reported as skipped. No file is opened but ignore files: whether a candidate is
    text is for :func:`text_of` to tell. ``on_file`` is called once per file name seen (progress
    over a large tree).
    """
    entries: list[FileEntry] = []
    skipped: list[Skipped] = []
    top, problems = Ignores.of(root, ignore)
    rules_of: dict[str, Ignores] = {}

    def unreadable_dir(exc: OSError) -> None:
        """A directory that cannot be listed is reported (with a trailing ``/``), not ignored."""
        rel = os.path.relpath(exc.filename, root) if exc.filename else "."
        skipped.append(Skipped(rel.replace(os.sep, "/") + "/", exc.strerror or "unreadable"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable_dir, followlinks=False):
        base = os.path.relpath(dirpath, root)
        prefix = "" if base == "." else base.replace(os.sep, "/") + "/"
        rules = rules_of.pop(dirpath, top).enter(prefix.rstrip("/"), filenames, problems)
        kept = []
        for name in sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(".")):
            why = rules.reason(prefix + name, is_dir=True)
            if why is None:
                kept.append(name)
                rules_of[os.path.join(dirpath, name)] = rules
            else:
                skipped.append(Skipped(f"{prefix}{name}/", why))
        dirnames[:] = kept
        for name in filenames:
            if on_file is not None:
                on_file()
            reason = kept_out(name)
            if reason == HIDDEN:
                continue
            rel = prefix + name
            reason = rules.reason(rel, is_dir=False) or reason
            if reason is not None:
                skipped.append(Skipped(rel, reason))
                continue
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError as exc:
                skipped.append(Skipped(rel, exc.strerror or "unreadable"))
                continue
            if stat.S_ISLNK(st.st_mode):
                skipped.append(Skipped(rel, SYMLINK))
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append(Skipped(rel, NOT_REGULAR))
                continue
            if st.st_size > MAX_FILE_BYTES:
                skipped.append(Skipped(rel, TOO_LARGE))
                continue
            entries.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
    skipped.extend(Skipped(p.source, p.reason) for p in problems)
    entries.sort(key=lambda e: e.rel_path)
    skipped.sort(key=lambda s: s.rel_path)
    return entries, skipped


def read_source(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, read safely whatever happened since the walk.

    The file may have been replaced by a symbolic link, a FIFO or a directory, may have grown
    past ``max_bytes`` or vanished: each raises :class:`OSError` whose ``strerror`` is a short
    reason for the skipped-files summary (:data:`SYMLINK`, :data:`NOT_REGULAR`,
    :data:`TOO_LARGE`, or the system's message). Nothing blocks and at most ``max_bytes + 1``
    bytes are read, so memory stays bounded however large the file has become.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise OSError(errno.ELOOP, SYMLINK, str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, TOO_LARGE, str(path))
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(max_bytes + 1)  # the file may have grown since fstat: bound the read
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, TOO_LARGE, str(path))
    return data


class FileChanged(UserError):
    """A file changed or vanished between being chunked and being indexed in the same run."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} changed while being indexed ({why}); the previous index is kept: run `index` again")


def check_unchanged(path: Path, size: int, mtime_ns: int) -> None:
    """:class:`FileChanged` unless the file at ``path`` still has the size and modification time it
    had when this run walked the tree (a file whose indexed documents are reused is not read again)."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        raise FileChanged(path, exc.strerror or "unreadable") from None
    if (found.st_size, found.st_mtime_ns) != (size, mtime_ns):
        raise FileChanged(path, "new content")


def read_indexed_text(path: Path, digest: str) -> str:
    """The text of a file chunked earlier in this run, whose content hash was ``digest``.

    Chunk offsets are only valid for the content they were computed from, so a file that
    vanished, changed or stopped being UTF-8 since raises :class:`FileChanged` (a
    :class:`~fastrag.errors.UserError`: one line at the command line, nothing published).
    """
    try:
        data = read_source(path)
    except OSError as exc:
        raise FileChanged(path, exc.strerror or "unreadable") from None
    text = decode(data) if content_hash(data) == digest else None
    if text is None:
        raise FileChanged(path, "new content")
    return text


def read_text(path: Path) -> str:
    """The text of a corpus file as results address it: ``str`` offsets of the file decoded as UTF-8.

    Every reader of spans (prompts, the server's snippets) reads files through here. Bytes that are not
    UTF-8 (the file changed since it was indexed) become U+FFFD instead of failing; an indexed file is
    valid UTF-8, so its text is exactly what :func:`decode` gave the chunker. :class:`OSError` when the
    file cannot be read.
    """
    return path.read_bytes().decode("utf-8", errors="replace")


def text_of(name: str, data: bytes) -> str | Skipped:
    """The text of file ``name`` (its path as reported) read as ``data``, or why it is not indexed:
    binary or not UTF-8, generated (:data:`GENERATED_LINE`), or, of a kind no language lists, empty
    (nothing tells it is text)."""
    text = decode(data)
    if text is None:
        return Skipped(name, BINARY)
    if len(text) > GENERATED_LINE and _generated(text):
        return Skipped(name, GENERATED)
    if not text.strip() and not is_listed(name.rsplit("/", 1)[-1]):
        return Skipped(name, EMPTY)
    return text


def _generated(text: str) -> bool:
    """Whether ``text`` holds a line of over :data:`GENERATED_LINE` characters almost without whitespace."""
    for match in _LONG_LINE.finditer(text):
        line = match.group()
        if len(line) - len("".join(line.split())) < GENERATED_SPACE * len(line):
            return True
    return False


def skipped_summary(skipped: list[Skipped]) -> str:
    """``skipped N files: a (why), b (why), c (why)``, then ``and K more`` and the count of each reason
    when more files were skipped than named."""
    shown = ", ".join(f"{s.rel_path} ({s.reason})" for s in skipped[:SHOWN_SKIPPED])
    text = f"skipped {len(skipped)} files: {shown}"
    if len(skipped) > SHOWN_SKIPPED:
        counts = Counter(s.reason for s in skipped)
        reasons = "; ".join(f"{reason}: {n}" for reason, n in counts.most_common())
        text += f" and {len(skipped) - SHOWN_SKIPPED} more ({reasons})"
    return text


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
