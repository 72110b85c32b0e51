"""What the routes work with: the live index, file texts, cached results, the model, the path rules."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

from fastrag.server.answers import Answerer
from fastrag.server.live import LiveIndex
from fastrag.server.results import SearchResults
from fastrag.server.safety import Confinement
from fastrag.server.texts import SourceTexts


@dataclass
class Services:
    """The state of one application; kept on ``app.state.fastrag`` (tests look at it)."""

    root: Path
    index_dir: Path
    models_dir: Path
    confinement: Confinement
    live: LiveIndex
    texts: SourceTexts
    results: SearchResults
    answerer: Answerer
    building: threading.Lock

    def shown(self, text: str) -> str:
        """``text`` (a message) with the project's folder left out of every path: relative paths, as on the
        command line (a client needs no more of the machine's folders)."""
        return text.replace(f"{self.root}{os.sep}", "")


async def services(request: Request) -> Services:
    """The FastAPI dependency giving a route its application's :class:`Services`.

    A coroutine, so that FastAPI calls it on the event loop: a plain function dependency runs in
    the thread pool, one more thread hop for every request.
    """
    found: Services = request.app.state.fastrag
    return found
