"""``--help``: the command line's and each command's, rendered from the signatures and docstrings.

Each flag shows its value's type and its real default (:mod:`fastrag.cli.signatures`); each command
ends with its example.
"""

from __future__ import annotations

import shutil
import textwrap

from fastrag.cli.signatures import Command, Flag
from fastrag.errors import program

#: Column where flag descriptions start.
_INDENT = 26


def overview(summary: str, known: dict[str, Command]) -> str:
    """The help of the whole command line: every command with its summary."""
    width = max(len(name) for name in known) + 4
    name = program()  # as the user started it: fastrag, or python -m fastrag
    lines = [f"usage: {name} COMMAND [ARGS]", "", summary, "", "commands:"]
    for name, command in known.items():
        lines.append(_wrap(command.summary, f"  {name.ljust(width - 2)}", width))
    lines += ["", f"`{name} COMMAND --help` shows a command's flags, their types and defaults, and an example."]
    return "\n".join(lines)


def command_help(command: Command) -> str:
    """The help of one command: usage, what it does, its arguments and flags, an example."""
    name = program()
    usage = " ".join([f"usage: {name} {command.name}", *(_synopsis(f) for f in command.flags)])
    lines = [_wrap(usage, "", 8), "", _wrap(command.summary, "", 0)]
    if command.description:
        lines += ["", *(_wrap(part, "", 0) for part in command.description.split("\n\n"))]
    positional = [f for f in command.flags if f.positional and f.required]
    named = [f for f in command.flags if f not in positional]
    if positional:
        lines += ["", "arguments:", *(_entry(f) for f in positional)]
    if named:
        lines += ["", "flags:", *(_entry(f) for f in named)]
    lines += ["", "example:", f"  {name} {command.example}"]
    return "\n".join(lines)


def _synopsis(flag: Flag) -> str:
    if flag.positional and flag.required:
        return flag.name.upper()
    shown = f"--{flag.name}" + (f" {flag.metavar}" if flag.metavar else "")
    shown += " ..." if flag.repeatable else ""
    return shown if flag.required else f"[{shown}]"


def _entry(flag: Flag) -> str:
    if flag.positional and flag.required:
        head = f"  {flag.name.upper()}"
        notes = [f"required; also --{flag.name} {flag.metavar}"]
    else:
        head = f"  --{flag.name}" + (f" {flag.metavar}" if flag.metavar else "")
        notes = ["required"] if flag.required else []
    if flag.repeatable and "repeatable" not in flag.help:
        notes.append("repeatable")
    if flag.switch:
        notes.append(f"--no{flag.name}: no")
    if not flag.required and "default" not in flag.help:  # else the text states it
        notes.append(f"default: {_default(flag)}")
    text = flag.help + (f" ({'; '.join(notes)})" if notes else "")
    if len(head) >= _INDENT:
        return head + "\n" + _wrap(text, " " * _INDENT, _INDENT)
    return _wrap(text, head.ljust(_INDENT), _INDENT)


def _default(flag: Flag) -> str:
    if flag.switch:
        return "yes" if flag.default else "no"
    return "none" if flag.default is None else str(flag.default)


def _wrap(text: str, first: str, indent: int) -> str:
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns))
    return textwrap.fill(
        " ".join(text.split()), width, initial_indent=first, subsequent_indent=" " * indent, break_on_hyphens=False
    )
