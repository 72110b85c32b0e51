"""A package index on 127.0.0.1 serving one file through the simple API (PEP 691 JSON or PEP 503 HTML), and
misbehaving on request: what ``scripts/fetch_corpus.py`` and :mod:`fastrag.model_packages` download from."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILENAME = "Fake_Corpus-1.0.tar.gz"
WAIT_S = 30


@dataclass
class Index:
    """What the fake index serves, and how it misbehaves."""

    url: str = ""
    project: str = "fake-corpus"  # normalized, as the simple API's page names it
    filename: str = FILENAME
    html: bool = False  # only PEP 503 HTML pages
    body: bytes = b""  # the file's bytes
    announced: str = ""  # the sha256 the page announces
    stall_after: int | None = None  # send this many bytes of the file, then wait for `release`
    drop_after: int | None = None  # send this many bytes of the file, then close the connection
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)


@contextmanager
def serving(state: Index) -> Iterator[Index]:
    """Serve ``state``'s one file on 127.0.0.1 as a simple API index (``state.url`` set) until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            if self.path == f"/simple/{state.project}/":
                self._page()
            elif self.path == f"/files/{state.filename}":
                self._file()
            else:
                self.send_error(404)

        def _page(self) -> None:
            href = f"../../files/{state.filename}"
            if state.html or "json" not in self.headers.get("Accept", ""):
                body = f'<html><body><a href="{href}#sha256={state.announced}">{state.filename}</a></body></html>'
                kind = "text/html"
            else:
                files = [
                    {"filename": "Fake_Corpus-1.0-py3-none-any.whl", "url": "../../files/x.whl", "hashes": {}},
                    {"filename": state.filename, "url": href, "hashes": {"sha256": state.announced}},
                ]
                body, kind = (
                    json.dumps({"meta": {"api-version": "1.0"}, "files": files}),
                    "application/vnd.pypi.simple.v1+json",
                )
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _file(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            cut = state.stall_after if state.stall_after is not None else state.drop_after
            if cut is None:
                self.wfile.write(state.body)
                return
            self.wfile.write(state.body[:cut])
            self.wfile.flush()
            if state.stall_after is not None:
                state.stalled.set()
                state.release.wait(WAIT_S)
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
