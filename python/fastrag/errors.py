"""The one exception type for what a user did wrong, and the command it suggests as the user started it.

Anything raised as :class:`UserError` is shown by the CLI as a single line on stderr with a
non-zero exit status; anything else is a bug. A message that suggests a command spells it
```` `fastrag COMMAND` ````; :func:`as_invoked` rewrites it as this process was started (``python -m fastrag``
or the ``fastrag`` script), so that the suggestion works where the user typed it.
"""

from __future__ import annotations

import os
import sys

#: How the ``python -m fastrag`` form is spelled.
MODULE_PROGRAM = "python -m fastrag"
#: The console script's name, and how messages spell a suggested command.
SCRIPT_PROGRAM = "fastrag"


def program() -> str:
    """The command line's name as this process was started: ``python -m fastrag`` (``sys.argv[0]`` is this
    package's ``__main__.py``), else ``fastrag`` (the console script, or fastrag used as a library, also under
    another package's ``python -m``)."""
    started = sys.argv[0] if sys.argv and sys.argv[0] else ""
    ours = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")
    return MODULE_PROGRAM if started and os.path.abspath(started) == ours else SCRIPT_PROGRAM


def as_invoked(message: str) -> str:
    """``message`` with every suggested command (```` `fastrag ...` ````) spelled as :func:`program`."""
    return message.replace(f"`{SCRIPT_PROGRAM} ", f"`{program()} ")


class UserError(Exception):
    """A problem the user can fix: a bad argument, a missing file, no index yet.

    ``exit_code`` is 2 for malformed arguments and 1 for everything else.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NoMatch(UserError):
    """Nothing matched (``grep``): exit status 1, as grep and rg give, with a plain note rather than an error."""


class UsageError(UserError):
    """A command-line argument has the wrong type or value."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)
