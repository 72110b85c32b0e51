"""Pause points: named moments inside a write where a crash test can kill the process.

Setting ``FASTRAG_PAUSE_AT`` to a comma-separated list of point names makes :func:`pause_point`
print ``fastrag: paused at <name>`` on stderr when the process reaches one of them, then sleep
for ``PAUSE_SECONDS`` before going on. A test waits for that line and kills the process at a
moment known to lie inside the work (see ``tests/test_robustness.py``). Unset, as in normal
use, a pause point costs one environment lookup.

The points:

``chunking``
    the indexer has chunked its first file (chunking workers running);
``chunked``
    every file chunked, the BM25 index not yet built;
``staged``
    the new generation fully written into its staging folder, not yet renamed;
``renamed``
    the generation folder renamed into place, ``CURRENT`` not yet replaced;
``lexical``
    a build with vectors has published its lexical generation, the vectors it lacks not yet embedded
    (:mod:`fastrag.indexing.vector_stage`);
``before-rename:<file name>``
    an atomic write has written and flushed its temporary file, not yet renamed it over
    ``<file name>`` (see :func:`fastrag.indexing.storage.write_bytes_atomic`).
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "FASTRAG_PAUSE_AT"
#: How long a pause lasts: far longer than a test needs to kill the process, short enough
#: that a forgotten process finishes on its own.
PAUSE_SECONDS = 60.0


def pause_point(name: str) -> None:
    """Announce ``name`` on stderr and sleep, if ``FASTRAG_PAUSE_AT`` lists it; else nothing."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted or name not in {w.strip() for w in wanted.split(",")}:
        return
    sys.stderr.write(f"\nfastrag: paused at {name}\n")
    sys.stderr.flush()
    time.sleep(PAUSE_SECONDS)
