"""How long a client may take to send a request: what uvicorn does not bound by itself.

uvicorn's ``timeout_keep_alive`` only closes a connection idle *between* requests; a client that opens a
connection and sends half of a request's head (or nothing) holds it, and a worker's slot, for ever.
:class:`HeadTimeoutProtocol` closes a connection whose request head is not complete within
:data:`HEAD_TIMEOUT_S` of the connection (or of the previous response); the body has its own bound
(:data:`~fastrag.server.safety.BODY_TIMEOUT_S`), kept by :class:`~fastrag.server.safety.Guard`: a 408.
:func:`server_config` is the one uvicorn configuration of ``serve`` and of ``mcp --transport http``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Seconds a client has to send a request's head (request line and headers).
HEAD_TIMEOUT_S = 10.0


class HeadTimeoutProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol (h11), closing a connection whose request head is late."""

    head_timeout = HEAD_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start counting the first request's head."""
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def handle_events(self) -> None:
        """Handle what came in; once the request's head is complete, its deadline no longer applies."""
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        """Start counting the next request's head (before a pipelined one is handled)."""
        self._arm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _disarm(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        self._head_timer = None

    def _head_late(self) -> None:
        """The head did not come in time: drop the connection (nothing was asked, nothing is answered)."""
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def server_config(app: Any) -> uvicorn.Config:
    """The uvicorn configuration serving ``app``: quiet, heads bounded (:class:`HeadTimeoutProtocol`),
    a five-second graceful shutdown."""
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        http=HeadTimeoutProtocol,
    )
