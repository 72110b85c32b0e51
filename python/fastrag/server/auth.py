"""Who may talk to the server: loopback by default; a bearer token and named hosts off loopback.

Bound to a loopback address, the server answers only requests addressed to a loopback name (a web
page elsewhere cannot reach it through DNS rebinding) and asks for nothing else. Bound to any other
address, anyone on the network can reach it, so :func:`access_for`:

- requires a bearer token on every request but ``/healthz`` and the page's static assets (the same
  files for everyone, no index data): ``--token``, else ``$FASTRAG_TOKEN``, else one generated with
  :mod:`secrets` and printed once on stderr;
- keeps an explicit list of ``Host`` names (``--allowed_host``, repeatable; by default the loopback
  names and the bound address);
- refuses state-changing requests that carry no ``Origin`` header (a browser always sends one;
  not for the MCP transport, whose clients are programs that send the token instead).

The HTTP API (``serve``) and the MCP streamable HTTP transport (``mcp --transport http``) are guarded
alike: :func:`access_for` decides, :class:`~fastrag.server.safety.Guard` enforces, :func:`announce`
says so on stderr. A token given on the command line must be a token: a bare ``--token`` (what
``--token $UNSET`` expands to), an empty one or a boolean word is refused (:func:`token_arg`).

The page is opened as ``/?token=...``: that one route also takes the token from the query string, and
the page's script sends it as ``Authorization: Bearer`` with every request. The token never reaches a
log (the access log is off and errors log the path only) nor a ``Referer`` (``no-referrer``).
"""

from __future__ import annotations

import hmac
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastrag.errors import UsageError

#: Host names a loopback-bound server answers to (anything else is refused: DNS rebinding).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: Environment variable holding the token when ``--token`` is not given.
TOKEN_ENV = "FASTRAG_TOKEN"
#: Paths open without the token: the health check, and the page's static assets.
OPEN_PATHS = frozenset({"/healthz"})
OPEN_PREFIXES = ("/static/",)
#: The page: takes the token from its query string too (``/?token=...``).
PAGE_PATH = "/"
#: Texts that are a flag's value by accident, never a chosen token (a bare ``--token`` reaches a
#: command as ``True``).
_NOT_TOKENS = frozenset({"true", "false", "none", "null"})


def token_arg(value: Any, name: str = "--token") -> str | None:
    """A bearer token given on the command line (``None``: not given): text, not blank, not a boolean."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    if not text or text.lower() in _NOT_TOKENS or any(c.isspace() or not c.isprintable() for c in text):
        shown = "a bare flag" if isinstance(value, bool) or text.lower() == "true" else repr(value)
        raise UsageError(f"{name} needs a token of printable characters without spaces, got {shown} "
                         f"(unset: omit {name}, or set ${TOKEN_ENV})")  # fmt: skip
    return text


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    return host in LOOPBACK_NAMES or host.startswith("127.")


@dataclass(frozen=True)
class Access:
    """What a request must show: the ``token`` (``None``: none needed), an ``Origin`` on writes."""

    token: str | None = None
    origin_on_writes: bool = False

    def refusal(self, path: str, query: bytes, headers: Mapping[str, str], write: bool) -> tuple[int, str] | None:
        """``(status, message)`` refusing the request, or ``None`` to let it through."""
        if self.token is not None and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
            presented = _bearer(headers.get("authorization", ""))
            if presented is None and path == PAGE_PATH:
                presented = parse_qs(query.decode("latin-1")).get("token", [None])[-1]
            if presented is None or not hmac.compare_digest(presented.encode(), self.token.encode()):
                return 401, "a bearer token is required: Authorization: Bearer <token> (the page: /?token=<token>)"
        if self.origin_on_writes and write and "origin" not in headers:
            return 403, "a request that changes something must carry an Origin header"
        return None


def _bearer(value: str) -> str | None:
    scheme, _, credentials = value.strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


@dataclass(frozen=True)
class Exposure:
    """How a server bound to some address is guarded; ``generated`` when the token was made here."""

    access: Access
    allowed_hosts: tuple[str, ...]
    generated: bool = False


def access_for(
    host: str,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    origin_on_writes: bool = True,
) -> Exposure:
    """The guard of a server bound to ``host``: loopback as before, anything else behind a token.

    ``token`` and ``allowed_hosts`` are the command line's; a token given on a loopback bind is required
    too. Off loopback, a missing token comes from ``env`` (default ``os.environ``) or is generated, and
    writes must carry an ``Origin`` unless ``origin_on_writes`` is false (a foreign ``Origin`` is always
    refused: :class:`~fastrag.server.safety.Guard`).
    """
    environ = os.environ if env is None else env
    loopback = is_loopback(host)
    hosts = tuple(allowed_hosts) or (LOOPBACK_NAMES if loopback else (*LOOPBACK_NAMES, host))
    if loopback:
        return Exposure(Access(token=token_arg(token)), hosts)
    chosen = token_arg(token) or token_arg(environ.get(TOKEN_ENV, "").strip() or None, f"${TOKEN_ENV}")
    generated = chosen is None
    access = Access(token=chosen or secrets.token_urlsafe(32), origin_on_writes=origin_on_writes)
    return Exposure(access, hosts, generated)


def announce(host: str, exposure: Exposure) -> None:
    """Say on stderr how a server bound to ``host`` is guarded; a generated token is printed here, once."""
    if not is_loopback(host):
        print(f"fastrag: answering Host names {', '.join(exposure.allowed_hosts)} only (add more with --allowed_host)",
              file=sys.stderr)  # fmt: skip
    if exposure.generated:
        how = f"send Authorization: Bearer <token>; the page: /?token=<token>; choose it with --token or ${TOKEN_ENV}"
        print(f"fastrag: access token {exposure.access.token} ({how})", file=sys.stderr, flush=True)
