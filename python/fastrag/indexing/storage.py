"""Atomic file writes: every file fastrag writes goes through here.

A file is written to a temporary sibling, flushed to disk, then renamed over the target, so a
reader (or a crash) sees either the old file or the new one, never half of either.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fastrag.errors import UserError
from fastrag.faults import pause_point


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + fsync + rename); a failed write (a
    read-only folder, a full disk) is a :class:`UserError` and leaves ``path`` as it was."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        pause_point(f"before-rename:{path.name}")
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise


#: Bytes :func:`ensure_writable` writes: enough to reach the disk, not to fill one.
PROBE_BYTES = 4096


def ensure_writable(folder: Path, what: str) -> None:
    """Create ``folder`` if needed and check that a file can be written there (a real write and
    fsync: permission bits do not stop root, a read-only mount or a full disk do); a
    :class:`UserError` naming ``what`` otherwise. Run before any work that ends in a write there."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".probe.", suffix=".tmp") as handle:
            handle.write(bytes(PROBE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise UserError(f"cannot write to {what} {folder}: {exc.strerror or exc}") from exc


def write_json_atomic(path: Path, payload: Any, indent: int | None = None) -> None:
    """Serialise ``payload`` as UTF-8 JSON and write it atomically."""
    text = json.dumps(payload, ensure_ascii=False, indent=indent)
    write_bytes_atomic(path, text.encode("utf-8"))


def fsync_dir(path: Path) -> None:
    """Flush a directory entry so a rename inside it survives a power cut (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
