"""Running the application: bind the socket, say where, serve with uvicorn until interrupted."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from fastrag.config import DEFAULT_INDEX_DIR
from fastrag.errors import UserError, as_invoked
from fastrag.server.app import create_app
from fastrag.server.auth import LOOPBACK_NAMES, access_for, announce, is_loopback

__all__ = ["LOOPBACK_NAMES", "address", "bind", "is_loopback", "serve"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port); a :class:`UserError` when impossible."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that do, and with
    # Nagle on, each response waits ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def address(sock: socket.socket) -> str:
    """The URL a bound socket serves."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(
    host: str = "127.0.0.1",
    port: int = 5000,
    index_dir: Path = DEFAULT_INDEX_DIR,
    model: str | None = None,
    data_dir: Path = Path("data"),
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve the index and the model on ``host:port`` until interrupted (Ctrl-C).

    Prints ``fastrag serving on http://host:port`` once the socket listens. A loopback server only
    answers requests addressed to a loopback name; any other bind asks for a bearer token and
    answers only ``allowed_hosts`` (see :func:`fastrag.server.auth.access_for`). A token generated
    here is printed once, on stderr.
    """
    import uvicorn

    from fastrag.server.timeouts import server_config

    exposure = access_for(host, token, allowed_hosts)  # a bad token fails before the socket is bound
    sock = bind(host, port)
    app = create_app(index_dir, data_dir, model, allowed_hosts=exposure.allowed_hosts, access=exposure.access)
    services = app.state.fastrag
    live = services.live.peek()
    print(f"fastrag serving on {address(sock)}", flush=True)
    announce(host, exposure)
    if live is None:
        print(as_invoked(f"fastrag: no index in {index_dir} yet: POST /index or run `fastrag index`"), file=sys.stderr)
    logging.getLogger("fastrag.server").addHandler(logging.StreamHandler(sys.stderr))
    uvicorn.Server(server_config(app)).run(sockets=[sock])
