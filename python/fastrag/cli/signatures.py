"""The commands of the command line as data, read from the methods of a command class.

Every public method of the class (and of the classes mixed into it) is a command; its parameters
are its flags. A parameter that may be passed by position (before ``*`` in the signature) may also
be given without its flag name; a keyword-only one only as ``--name``. A parameter without a
default is required. Types come from the annotations, help texts from the Google-style docstring
(``Args:``), the example from :func:`example`. Checking a command line (:mod:`fastrag.cli.argv`)
and rendering its help (:mod:`fastrag.cli.help`) both read this, so neither can drift from the
signatures.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from fire import docstrings

from fastrag.cli.flags import REPEATED_FLAGS

CommandT = TypeVar("CommandT", bound=Callable[..., None])

#: Attribute of a command method holding its example (see :func:`example`).
EXAMPLE_ATTR = "__fastrag_example__"


def example(command_line: str) -> Callable[[CommandT], CommandT]:
    """Attach an example to a command: its arguments after ``fastrag`` (or ``python -m fastrag``), as a user types
    them; the example must work in any repository."""

    def decorate(command: CommandT) -> CommandT:
        setattr(command, EXAMPLE_ATTR, command_line)
        return command

    return decorate


@dataclass(frozen=True)
class Flag:
    """One parameter of a command."""

    name: str
    #: The annotation, resolved (``int``, ``str | None``, ``Literal[...]``, ``Path``, ``bool``).
    kind: Any
    #: The default, or :data:`inspect.Parameter.empty` for a required parameter.
    default: Any
    #: May be given by position, without ``--name``.
    positional: bool
    help: str

    @property
    def required(self) -> bool:
        """No default: the command line must give it."""
        return self.default is inspect.Parameter.empty

    @property
    def switch(self) -> bool:
        """A yes/no flag: ``--name`` alone is true, ``--noname`` false."""
        return self.kind is bool

    @property
    def repeatable(self) -> bool:
        """May be given more than once (:data:`~fastrag.cli.flags.REPEATED_FLAGS`)."""
        return f"--{self.name}" in REPEATED_FLAGS

    @property
    def metavar(self) -> str:
        """How help names the flag's value: ``INT``, ``TEXT``, ``PATH``, or the choices ``a|b|c``."""
        return _metavar(self.kind)


@dataclass(frozen=True)
class Command:
    """One command: its name, help texts, flags in signature order and example."""

    name: str
    summary: str
    description: str
    flags: tuple[Flag, ...]
    example: str

    def flag(self, name: str) -> Flag | None:
        """The flag called ``name``, if any."""
        return next((f for f in self.flags if f.name == name), None)


def commands(cls: type) -> dict[str, Command]:
    """Every public method of ``cls`` (its own and its bases', in definition order) as a :class:`Command`."""
    seen: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for name, member in vars(klass).items():
            if not name.startswith("_") and inspect.isfunction(member):
                seen[name] = getattr(cls, name)
    return {name: _command(name, method) for name, method in seen.items()}


def _command(name: str, method: Callable[..., Any]) -> Command:
    info = docstrings.parse(inspect.getdoc(method) or "")
    texts = {a.name: (a.description or "") for a in info.args or []}
    hints = typing.get_type_hints(method)
    flags = []
    for param in list(inspect.signature(method).parameters.values())[1:]:  # past self
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"command {name}: *{param.name} cannot be checked; name every flag")
        if param.name not in hints:
            raise TypeError(f"command {name}: parameter {param.name} has no type annotation")
        positional = param.kind is param.POSITIONAL_OR_KEYWORD
        flags.append(Flag(param.name, hints[param.name], param.default, positional, texts.get(param.name, "")))
    return Command(
        name=name,
        summary=info.summary or "",
        description=info.description or "",
        flags=tuple(flags),
        example=getattr(method, EXAMPLE_ATTR, ""),
    )


def _metavar(kind: Any) -> str:
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        return _metavar(args[0])
    if typing.get_origin(kind) is Literal:
        return "|".join(str(a) for a in args)
    names: dict[Any, str] = {int: "INT", float: "NUMBER", str: "TEXT", Path: "PATH", bool: ""}
    return names.get(kind, "VALUE")
