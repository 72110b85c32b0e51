"""``fastrag serve``: one process keeps the index and the model loaded behind an HTTP API and a page.

:func:`create_app` builds the FastAPI application (tests run it in-process); :func:`serve` runs it
with uvicorn. Importing this package imports FastAPI, so the command line imports it only for ``serve``.
"""

from __future__ import annotations

from fastrag.server.app import create_app
from fastrag.server.run import serve

__all__ = ["create_app", "serve"]
