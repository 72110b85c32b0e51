"""``python -m fastrag``: run the command line (:mod:`fastrag.cli`) and exit with its status."""

from __future__ import annotations

import sys

from fastrag.cli import main

if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    raise SystemExit(status)
