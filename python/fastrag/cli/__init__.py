"""The command line: ``fastrag <command> [flags]`` (Python Fire).

:mod:`fastrag.cli.commands` holds the commands and :func:`main`; :mod:`fastrag.cli.signatures` reads
them as data, :mod:`fastrag.cli.argv` checks a command line against them before anything runs,
:mod:`fastrag.cli.help` renders ``--help``; :mod:`fastrag.cli.flags` handles repeated flags, raw
text arguments and one-line errors.
"""

from fastrag.cli.commands import Commands, main
from fastrag.cli.flags import REPEATED_FLAGS, REPEATED_SEP

__all__ = ["REPEATED_FLAGS", "REPEATED_SEP", "Commands", "main"]
