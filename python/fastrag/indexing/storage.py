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

from fastrag.faults import pause_point


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        pause_point(f"before-rename:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
