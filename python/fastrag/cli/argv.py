"""Checking a command line against the chosen command's signature, before the command runs.

:func:`parse` reads ``argv`` (``COMMAND [ARGS]``) against the commands of
:func:`fastrag.cli.signatures.commands` and returns either a :class:`Help` request or a
:class:`Call` whose arguments are all spelled ``--name=value``: Fire then parses the values and runs
the command, and has nothing left to interpret after it returns. Anything it cannot place, an
unknown flag (with the nearest valid one), a flag given twice that cannot repeat, a positional
argument too many, a required one missing, is a :class:`~fastrag.errors.UsageError` (exit status 2)
raised before anything is read, built or written.

The syntax: ``--name value`` or ``--name=value`` (``-`` and ``_`` alike in names); a yes/no flag
alone (``--show_missed``) or negated (``--noshow_missed``); ``-x`` for the one flag starting with
``x``; ``--help`` or ``-h`` anywhere (and Fire's ``-- --help``); after ``--`` every other word is a
positional argument (a query that starts with ``-``). A flag may repeat only when it is in
:data:`~fastrag.cli.flags.REPEATED_FLAGS`; its values reach the command joined by
:data:`~fastrag.cli.flags.REPEATED_SEP`, and a bare one gets the empty value, which its check refuses.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from fastrag.cli.flags import REPEATED_SEP
from fastrag.cli.signatures import Command, Flag
from fastrag.errors import UsageError

HELP_FLAGS = ("--help", "-h")
#: End of flags: every word after it is a positional argument.
END_OF_FLAGS = "--"
#: What Fire reads as a flag (so also what this module does): ``--anything``, or ``-`` and a letter
#: (``-1`` is a value).
_FLAG = re.compile(r"--.*|-[A-Za-z].*", re.DOTALL)


@dataclass(frozen=True)
class Help:
    """``--help``: of a command, or of the whole command line (``command`` is None)."""

    command: str | None


@dataclass(frozen=True)
class Call:
    """A checked command line: the command and its arguments, each as ``--name=value``."""

    command: str
    argv: list[str]


def is_flag(word: str) -> bool:
    """Whether ``word`` is read as a flag rather than a value."""
    return _FLAG.fullmatch(word) is not None


def parse(known: dict[str, Command], argv: list[str]) -> Help | Call:
    """Check ``argv`` against the command it names (see the module's docstring)."""
    if not argv or argv[0] in HELP_FLAGS or argv in ([END_OF_FLAGS, h] for h in HELP_FLAGS):
        return Help(None)
    name = argv[0].replace("-", "_")
    command = known.get(name)
    if command is None:
        what = "flag" if is_flag(argv[0]) else "command"
        raise UsageError(f"unknown {what} {argv[0]}{_nearest(name, list(known))} (see `fastrag --help`)")
    words = argv[1:]
    rest: list[str] = []
    if END_OF_FLAGS in words:
        cut = words.index(END_OF_FLAGS)
        words, rest = words[:cut], words[cut + 1 :]
    if any(w in HELP_FLAGS for w in words) or rest in ([h] for h in HELP_FLAGS):  # also Fire's `-- --help`
        return Help(command.name)
    values, positionals = _flags(command, words)
    _place(command, values, positionals + rest)
    missing = [f for f in command.flags if f.required and f.name not in values]
    if missing:
        names = " and ".join(_spelled(f) for f in missing)
        raise UsageError(f"{command.name}: {names} {'is' if len(missing) == 1 else 'are'} required")
    return Call(command.name, [f"--{key}={REPEATED_SEP.join(given)}" for key, given in values.items()])


def _flags(command: Command, words: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The values of the flags among ``words`` by name, and the words that are not flags or their values."""
    values: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not is_flag(word):
            positionals.append(word)
            continue
        spelled, eq, inline = word.partition("=")
        flag, negated = _resolve(command, spelled)
        if eq:
            if negated:
                raise UsageError(f"{spelled} takes no value (write --{flag.name}={inline})")
            value = inline
        elif flag.switch:
            value = "False" if negated else "True"
        elif i < len(words) and not is_flag(words[i]):
            value = words[i]
            i += 1
        elif flag.repeatable:
            value = ""  # refused by the flag's own check, which names what it needs
        else:
            raise UsageError(f"--{flag.name} needs a value ({flag.metavar or 'VALUE'}) for {command.name}")
        if flag.name in values and not flag.repeatable:
            raise UsageError(f"--{flag.name} is given twice for {command.name} (it takes one value)")
        values.setdefault(flag.name, []).append(value)
    return values, positionals


def _resolve(command: Command, spelled: str) -> tuple[Flag, bool]:
    """The flag ``spelled`` (``--name``, ``--noname`` of a yes/no flag, ``-x``) names, and whether it is negated."""
    key = (spelled[2:] if spelled.startswith("--") else spelled[1:]).replace("-", "_")
    flag = command.flag(key) if spelled.startswith("--") else None
    if flag is not None:
        return flag, False
    if spelled.startswith("--") and key.startswith("no"):
        negated = command.flag(key[2:])
        if negated is not None and negated.switch:
            return negated, True
        if negated is not None:
            raise UsageError(
                f"unknown flag {spelled} for {command.name} (--{negated.name} is not yes/no: give it a value)"
            )
    if not spelled.startswith("--") and len(key) == 1:
        starting = [f for f in command.flags if f.name.startswith(key)]
        if len(starting) == 1:
            return starting[0], False
        if starting:
            choices = ", ".join(f"--{f.name}" for f in starting)
            raise UsageError(f"{spelled} is ambiguous for {command.name}: {choices}")
    names = [f.name for f in command.flags]
    raise UsageError(f"unknown flag {spelled} for {command.name}{_nearest(key, names, '--')}")


def _place(command: Command, values: dict[str, list[str]], positionals: list[str]) -> None:
    """Give the positional arguments, in order, to the positional parameters not given as flags."""
    free = [f for f in command.flags if f.positional and f.name not in values]
    if len(positionals) > len(free):
        extra = positionals[len(free)]
        takes = " ".join(_spelled(f) for f in free) if free else "none"
        raise UsageError(
            f"{command.name}: unexpected argument {extra!r} (positional arguments it takes: {takes}; "
            "quote a value that holds spaces)"
        )
    for flag, value in zip(free, positionals):
        values[flag.name] = [value]


def _spelled(flag: Flag) -> str:
    return flag.name.upper() if flag.positional else f"--{flag.name}"


def _nearest(name: str, choices: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""
