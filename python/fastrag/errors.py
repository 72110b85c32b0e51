"""The one exception type for what a user did wrong.

Anything raised as :class:`UserError` is shown by the CLI as a single line on stderr with a
non-zero exit status; anything else is a bug.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: a bad argument, a missing file, no index yet.

    ``exit_code`` is 2 for malformed arguments and 1 for everything else.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(UserError):
    """A command-line argument has the wrong type or value."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)
