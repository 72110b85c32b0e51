"""Which files of a repository are indexed, how they are read, and their fingerprints.

Users point fastrag at any tree: symbolic links (loops, dangling, or leading out of the tree),
FIFOs and devices, files too large to be source, files that change or vanish while the index
is built, or after. The walk never follows a link or opens anything; :func:`read_source` opens a file
without following a link at any component of its path or blocking, and never reads more than
:data:`MAX_FILE_BYTES`; every query-time read goes through it too (:func:`read_indexed`: still the
content indexed, or refused).
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
#: The file ``index`` writes into its index folder (:func:`fastrag.indexing.generations.claim_index_dir`):
#: a folder holding it is an index, never walked into (an index folder inside the repository it indexes).
INDEX_MARKER = ".fastrag-index"
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
#: Why a file is not read at query time: another content than the one indexed, a path leaving its folder.
CHANGED = "changed since it was indexed: run `fastrag index` again"
OUTSIDE = "not a path inside the repository"
GENERATED = f"minified or generated (a line of over {GENERATED_LINE} characters, almost no spaces)"
#: Skipped files named in the summary line before "and N more".
SHOWN_SKIPPED = 3
#: A line of over :data:`GENERATED_LINE` characters, tried at line starts only: unanchored, every position
#: of a short line was tried in turn (5x slower on a 150 KB shell script).
_LONG_LINE = re.compile(f"(?m)^[^\n]{{{GENERATED_LINE + 1},}}")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: How :func:`open_file` opens each folder on the way: a folder only, never inherited by a child process.
_DIR_FLAGS = getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: How :func:`open_file` opens a file: never through a symbolic link, never waiting for a writer (a FIFO
#: swapped in after the walk), never inherited by a child process.
_OPEN_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


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
            if os.path.lexists(os.path.join(dirpath, name, INDEX_MARKER)):
                continue  # a fastrag index (this one, inside its repository): not part of the repository
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


def open_file(root: Path, rel_path: str) -> int:
    """A descriptor of the regular file ``rel_path`` (``/``-separated) under the folder ``root``, opened
    one component at a time from ``root`` without following a symbolic link at any of them.

    The one way fastrag opens a repository's file, at indexing and at query time: a link (to a file or
    a folder, in or out of the tree), a FIFO, a device or a socket put anywhere on the path after the
    walk is refused, never read through; nothing blocks (a FIFO is opened without waiting for a
    writer, then refused). Raises :class:`OSError` whose ``strerror`` is a short reason
    (:data:`SYMLINK`, :data:`NOT_REGULAR`, :data:`OUTSIDE`, or the system's message).
    """
    parts = rel_path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise OSError(errno.EINVAL, OUTSIDE, rel_path)
    folder = os.open(root, os.O_RDONLY | _DIR_FLAGS)  # the root as the user named it (it may be a link)
    part = parts[0]
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | _DIR_FLAGS | _NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        part = parts[-1]
        fd = os.open(part, _OPEN_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link, or no folder where one was (or a link to one)
            linked = exc.errno == errno.ELOOP or _is_link(part, folder)
            raise OSError(exc.errno, SYMLINK if linked else NOT_REGULAR, rel_path) from None
        raise OSError(exc.errno, exc.strerror, rel_path) from None
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, rel_path)
    except OSError:
        os.close(fd)
        raise
    return fd


def _is_link(name: str, folder: int) -> bool:
    """Whether ``name`` in the open folder ``folder`` is a symbolic link (``False`` when it is gone)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_source(root: Path, rel_path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``rel_path`` under ``root``, read safely whatever happened since the
    walk (:func:`open_file`: no link followed, nothing but a regular file).

    The file may have been replaced by a symbolic link, a FIFO or a directory, may have grown past
    ``max_bytes`` or vanished: each raises :class:`OSError` whose ``strerror`` is a short reason for the
    skipped-files summary (:data:`SYMLINK`, :data:`NOT_REGULAR`, :data:`TOO_LARGE`, or the system's
    message). Nothing blocks and at most ``max_bytes + 1`` bytes are read, so memory stays bounded
    however large the file has become.
    """
    fd = open_file(root, rel_path)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise OSError(errno.EFBIG, TOO_LARGE, rel_path)
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(max_bytes + 1)  # the file may have grown since fstat: bound the read
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, TOO_LARGE, rel_path)
    return data


def read_as_written(path: str) -> str:
    """The text of a file named by a results file (``path`` as written: relative to the working
    directory, or absolute), read by :func:`read_source` from the working directory (or ``/``): no link
    on the way, a regular file, at most :data:`MAX_FILE_BYTES`. Bytes that are not UTF-8 become U+FFFD.
    :class:`OSError` (a short ``strerror``) when it cannot be read."""
    absolute = os.path.isabs(path)
    rel = os.path.normpath(path).lstrip("/") if absolute else os.path.normpath(path)
    data = read_source(Path("/") if absolute else Path.cwd(), rel.replace(os.sep, "/"))
    return data.decode("utf-8", errors="replace")


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


def read_indexed(root: Path, rel_path: str, digest: str) -> str:
    """The text of the file ``rel_path`` under ``root`` as it was indexed: its content hash still
    ``digest`` (chunk offsets are only valid for the content they were computed from).

    Read by :func:`read_source`; :class:`OSError` with a short ``strerror`` when it cannot be read or is
    no longer the content indexed (:data:`CHANGED`): never the text of another file.
    """
    data = read_source(root, rel_path)
    text = decode(data) if content_hash(data) == digest else None
    if text is None:
        raise OSError(errno.ESTALE, CHANGED, rel_path)
    return text


def read_indexed_text(root: Path, rel_path: str, digest: str) -> str:
    """:func:`read_indexed` for the indexer: a file chunked earlier in this run that vanished, changed or
    stopped being UTF-8 since raises :class:`FileChanged` (a :class:`~fastrag.errors.UserError`: one line
    at the command line, nothing published)."""
    try:
        return read_indexed(root, rel_path, digest)
    except OSError as exc:
        raise FileChanged(root / rel_path, exc.strerror or "unreadable") from None


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
