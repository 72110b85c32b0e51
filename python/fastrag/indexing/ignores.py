"""Ignore files: the paths of a tree that its ``.gitignore`` files, ``.git/info/exclude`` and
``.fastragignore`` files leave out of the index.

Patterns are git's (``pathspec.GitIgnoreSpec``: the same matching as ``git status``): each file
applies to its own folder and below, a deeper file overrides a shallower one, ``!pattern`` brings a
path back, and a folder left out is not entered (git cannot bring back a file inside it either).
Lowest precedence first: ``.git/info/exclude``, then per folder ``.gitignore``, then ``.fastragignore``.

``.gitignore`` and ``.git/info/exclude`` describe the untracked files of a git checkout, so they apply
when the indexed root is one (it holds ``.git``), as ripgrep applies them only inside a repository: an
unpacked release keeps its project's ``.gitignore`` but ships what it names (vLLM 0.10.1's package
ships its generated kernels, ``_version.py`` and ``vllm/benchmarks/lib/``, which git tracks despite a
``lib/`` pattern). ``.fastragignore`` is fastrag's own and applies everywhere. ``index --no_ignore``
applies none of them.

A pattern git's rules cannot read (``!`` alone, a trailing ``\\``, a reversed range ``[z-a]``) is
not applied and reported, as an ignore file that cannot be read is: nothing else changes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore import GitIgnorePatternError

__all__ = ["FASTRAG_IGNORE", "GIT_IGNORE", "IGNORED_BY", "Ignores", "Problem"]

#: fastrag's own ignore file, in any folder of the tree, git's syntax.
FASTRAG_IGNORE = ".fastragignore"
#: Git's ignore file, in any folder of a checkout.
GIT_IGNORE = ".gitignore"
#: Git's per-checkout ignore file, relative to the root.
GIT_EXCLUDE = ".git/info/exclude"
#: How a skipped path's reason names the ignore file that left it out.
IGNORED_BY = "ignored by "
#: Ignore files larger than this are not read (an ignore file is a few lines).
MAX_IGNORE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Rules:
    """The patterns of one ignore file: the folder they apply to (relative to the root, ``""`` or
    ending with ``/``) and the file, as reasons name it."""

    base: str
    source: str
    spec: GitIgnoreSpec


@dataclass(frozen=True, slots=True)
class Problem:
    """An ignore file, or one of its patterns, that could not be applied."""

    source: str
    reason: str


class Ignores:
    """The ignore rules in force in one folder of a tree (immutable: :meth:`enter` makes a folder's)."""

    def __init__(self, root: Path, git: bool, enabled: bool = True, rules: tuple[_Rules, ...] = ()) -> None:
        """Rules of ``root`` (``git``: whether git's ignore files apply; ``enabled``: whether any does)."""
        self.root = root
        self.git = git
        self.enabled = enabled
        self.rules = rules

    @classmethod
    def of(cls, root: Path, enabled: bool = True) -> tuple[Ignores, list[Problem]]:
        """The rules of ``root`` before its own folder is entered (``.git/info/exclude``), and the
        problems met reading them; no rule at all when not ``enabled``."""
        if not enabled:
            return cls(root, False, enabled=False), []
        git = os.path.lexists(root / ".git")
        ignores = cls(root, git)
        problems: list[Problem] = []
        if git:
            ignores = ignores._with("", GIT_EXCLUDE, problems)
        return ignores, problems

    def enter(self, rel_dir: str, names: list[str] | set[str], problems: list[Problem]) -> Ignores:
        """The rules in force in folder ``rel_dir`` (relative to the root, ``""`` for the root) whose
        file names are ``names``: these plus its ignore files; their problems go to ``problems``."""
        if not self.enabled:
            return self
        base = f"{rel_dir}/" if rel_dir else ""
        ignores = self
        for name in (GIT_IGNORE, FASTRAG_IGNORE) if self.git else (FASTRAG_IGNORE,):
            if name in names:
                ignores = ignores._with(base, base + name, problems)
        return ignores

    def reason(self, rel_path: str, is_dir: bool) -> str | None:
        """``ignored by FILE`` when the last rule matching ``rel_path`` (relative to the root) leaves it
        out, else ``None``."""
        verdict: str | None = None
        for rules in self.rules:
            if not rel_path.startswith(rules.base):
                continue
            relative = rel_path[len(rules.base) :] + ("/" if is_dir else "")
            include = rules.spec.check_file(relative).include
            if include is not None:
                verdict = IGNORED_BY + rules.source if include else None
        return verdict

    def _with(self, base: str, source: str, problems: list[Problem]) -> Ignores:
        """These rules and those of the ignore file ``source`` (relative to the root), applying to ``base``."""
        lines = _read_lines(self.root / source, source, problems)
        if not lines:
            return self
        spec = _compile(lines, source, problems)
        return Ignores(self.root, self.git, True, (*self.rules, _Rules(base, source, spec)))


def _read_lines(path: Path, source: str, problems: list[Problem]) -> list[str]:
    """The lines of the ignore file at ``path``; none (and a problem) when it cannot be read as text."""
    try:
        if not path.is_file() or path.is_symlink():
            return []
        if path.stat().st_size > MAX_IGNORE_BYTES:
            problems.append(Problem(source, f"larger than {MAX_IGNORE_BYTES // 1024} KiB, not applied"))
            return []
        return path.read_bytes().decode("utf-8").splitlines()
    except OSError as exc:
        problems.append(Problem(source, f"{exc.strerror or 'unreadable'}, not applied"))
    except UnicodeDecodeError:
        problems.append(Problem(source, "not UTF-8, not applied"))
    return []


def _compile(lines: list[str], source: str, problems: list[Problem]) -> GitIgnoreSpec:
    """The patterns of ``lines``; a line git's rules cannot read is left out, as a problem."""
    try:
        return GitIgnoreSpec.from_lines(lines)
    except (GitIgnorePatternError, re.error, ValueError):
        pass
    good: list[str] = []
    for number, line in enumerate(lines, 1):
        try:
            GitIgnoreSpec.from_lines([line])
        except (GitIgnorePatternError, re.error, ValueError):
            problems.append(Problem(source, f"line {number}: malformed pattern {line.strip()!r}, not applied"))
            continue
        good.append(line)
    return GitIgnoreSpec.from_lines(good)
