"""What keeps the API safe to expose: confined paths, bounded bodies, same-origin writes, strict headers.

- :class:`Confinement`: a path given to the API must name something inside the project's ``data/``
  folder: no ``..``, no absolute path elsewhere, and once symbolic links are resolved it must still lie
  inside ``data/`` (or inside the corpus the live index was built from, which the operator chose).
- :class:`Guard`: an ASGI middleware that bounds the request body (declared ``Content-Length`` and the
  bytes actually received), refuses cross-origin writes (a web page elsewhere posting a form to the
  local server), unexpected ``Host`` headers (DNS rebinding) and, off loopback, requests without the
  bearer token (:mod:`fastrag.server.auth`), and adds security headers to every response (a content
  security policy that allows nothing but this server's own assets).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastrag.arguments import path_arg
from fastrag.errors import UsageError
from fastrag.server.auth import Access
from fastrag.server.errors import BodyTooLarge, BodyTooSlow

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]
App = Callable[[Scope, Receive, Send], Any]

#: Largest request body accepted (bytes).
MAX_BODY_BYTES = 1 << 20
#: Seconds a client has to send a request's whole body (a 408 answer after that).
BODY_TIMEOUT_S = 30.0

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (
        b"content-security-policy",
        (
            b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        ),
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

#: Methods that change nothing: never refused for their origin.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Confinement:
    """Checks paths given to the API against the project's ``data/`` folder.

    ``root`` is the project root (paths are relative to it, as on the command line), ``data_dir`` the
    folder everything must lie in; ``extra_roots`` returns further folders that resolved paths may lie
    in (the live index's corpus when ``data/raw/<corpus>`` is a symbolic link to it).
    """

    def __init__(self, root: Path, data_dir: Path, extra_roots: Callable[[], Iterable[Path]] = lambda: ()) -> None:
        self.root = Path(os.path.abspath(root))
        self.data_dir = Path(os.path.abspath(data_dir))
        self._extra_roots = extra_roots

    def check(self, name: str, value: Any) -> Path:
        """The absolute path (symbolic links kept) that ``value`` names; a :class:`UsageError` (400) otherwise."""
        path = path_arg(name, value, prefix="")
        text = str(value)
        if "\x00" in text:
            raise UsageError(f"{name} contains a NUL character")
        if ".." in path.parts:
            raise UsageError(f"{name} must not contain '..': {text!r}")
        lexical = Path(os.path.normpath(path if path.is_absolute() else self.root / path))
        if not lexical.is_relative_to(self.data_dir):
            raise UsageError(f"{name} must lie inside {self.display(self.data_dir)}/, got {text!r}")
        try:
            resolved = lexical.resolve()
        except (OSError, RuntimeError) as exc:  # a symbolic-link loop
            raise UsageError(f"{name} cannot be resolved: {text!r}") from exc
        allowed = [self.data_dir.resolve(), *(Path(p) for p in self._extra_roots())]
        if not any(resolved.is_relative_to(base) for base in allowed):
            raise UsageError(f"{name} leads outside {self.display(self.data_dir)}/ through a symbolic link: {text!r}")
        return lexical

    def display(self, path: Path) -> str:
        """``path`` relative to the project root when it lies below it (as results name files)."""
        absolute = Path(os.path.abspath(path))
        return absolute.relative_to(self.root).as_posix() if absolute.is_relative_to(self.root) else str(absolute)


def _host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:5000`` → ``::1``, ``localhost:5000`` → ``localhost``)."""
    return (urlsplit(f"//{value}").hostname or "").lower()


class Guard:
    """ASGI middleware: body bound, same-origin writes, ``Host`` allow-list, bearer token, security headers.

    ``allowed_hosts`` (host names, any port) is checked only when given, ``access`` (token, ``Origin`` on
    writes) likewise: :func:`fastrag.server.run.serve` passes both (see :func:`fastrag.server.auth.access_for`).
    """

    def __init__(
        self,
        app: App,
        max_body: int = MAX_BODY_BYTES,
        allowed_hosts: Sequence[str] | None = None,
        access: Access | None = None,
        body_timeout: float | None = None,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.body_timeout = body_timeout  # None: BODY_TIMEOUT_S, read at each request
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower().strip("[]") for h in allowed_hosts)
        self.access = access or Access()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _send_error(send, *refusal)
            return
        received = 0
        started = False
        complete = False  # the whole body is in: waiting further is for a disconnect, never bounded
        deadline: float | None = None

        async def bounded_receive() -> Message:
            nonlocal received, complete, deadline
            if complete:
                message: Message = await receive()
                return message
            loop = asyncio.get_running_loop()
            bound = BODY_TIMEOUT_S if self.body_timeout is None else self.body_timeout
            deadline = deadline if deadline is not None else loop.time() + bound
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise BodyTooSlow(bound) from None
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge(self.max_body)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        async def secured_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        try:
            await self.app(scope, bounded_receive, secured_send)
        except (BodyTooLarge, BodyTooSlow) as exc:  # raised outside a route (a route's handler answers itself)
            if started:
                raise
            await _send_error(send, exc.status, str(exc))

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.allowed_hosts is not None and _host_name(host) not in self.allowed_hosts:
            return 400, f"unexpected Host header {host!r}"
        method = scope.get("method", "GET")
        denied = self.access.refusal(scope.get("path", ""), scope.get("query_string", b""), headers,
                                     write=method not in SAFE_METHODS)  # fmt: skip
        if denied is not None:
            return denied
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return 400, "bad Content-Length header"
            if int(declared) > self.max_body:
                return 413, f"request body too large: at most {self.max_body} bytes"
        origin = headers.get("origin")
        cross_origin = origin is not None and (origin == "null" or urlsplit(origin).netloc.lower() != host.lower())
        if cross_origin and method not in SAFE_METHODS:
            return 403, f"cross-origin request refused (Origin {origin!r})"
        return None


async def _send_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    challenge = [(b"www-authenticate", b'Bearer realm="fastrag"')] if status == 401 else []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *challenge,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
