"""``python -m fastrag`` and the ``fastrag`` console script: run the command line (:mod:`fastrag.cli`)
and exit with its status."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from fastrag.cli import main

#: Exit status when the reader of standard output went away (``... | head``): 128 + SIGPIPE,
#: what a shell reports for a filter cut short.
BROKEN_PIPE_STATUS = 141


def console() -> NoReturn:
    """Run the command line on ``sys.argv`` and exit with its status (the ``fastrag`` script's entry point)."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Nothing more can be shown; point stdout at /dev/null so that the interpreter's own
        # flush at exit does not print a second error, and stop quietly like a Unix filter.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = BROKEN_PIPE_STATUS
    raise SystemExit(status)


if __name__ == "__main__":
    console()
