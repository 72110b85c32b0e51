"""The command line: ``python -m fastrag <command> [flags]`` (Python Fire).

:mod:`fastrag.cli.commands` holds the commands and :func:`main`; :mod:`fastrag.cli.flags` the
handling of repeated flags, raw text arguments and one-line errors.
"""

from fastrag.cli.commands import Commands, main
from fastrag.cli.flags import REPEATED_FLAGS, REPEATED_SEP, join_repeated

__all__ = ["REPEATED_FLAGS", "REPEATED_SEP", "Commands", "join_repeated", "main"]
