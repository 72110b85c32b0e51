"""Many repositories, one index: a shard per repository and a catalog naming them (the layout
and the search side: :mod:`fastrag.indexing.catalog`).

``index --repos FILE`` builds or updates every shard (each incremental on its own: an unchanged
repository costs a fingerprint check), in-process or as Ray tasks (:mod:`fastrag.indexing.distributed`),
then replaces the catalog atomically, so a reader sees the old set of shards or the new one. A
repository that fails is reported and does not stop the others; a shard it built before stays in the
catalog. Each shard indexes its paths as ``<name>/<path>``, so that its chunks index and display as in
one index over a folder holding every repository under its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fastrag.errors import UsageError, UserError
from fastrag.indexing.builder import IndexParams, IndexPlan, IndexReport, finish_index, plan_index
from fastrag.indexing.catalog import CATALOG_FILE, CATALOG_VERSION, SHARDS_DIR, shard_dir
from fastrag.indexing.generations import CURRENT_FILE, claim_index_dir, current_generation
from fastrag.indexing.storage import write_json_atomic

#: What a shard name may hold: it names a folder and starts every result path of its repository.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True, slots=True)
class Repo:
    """A repository of a ``--repos`` list: its shard name and its path."""

    name: str
    path: Path


@dataclass(frozen=True, slots=True)
class ShardOutcome:
    """What building one shard did: ``error`` is ``None`` on success, else why it failed."""

    name: str
    error: str | None = None
    files: int = 0
    chunks: int = 0
    up_to_date: bool = False
    seconds: float = 0.0


#: Runs :func:`build_shard` for every repository (in-process, or as Ray tasks).
Runner = Callable[[Sequence[Repo], Path, IndexParams], list[ShardOutcome]]


def read_repos(list_file: Path) -> list[Repo]:
    """The repositories of ``list_file``: one per line, ``path`` or ``name=path``.

    Blank lines and lines starting with ``#`` are skipped; a relative path is relative to the
    list's folder; a repository without a name is named after its folder.
    """
    try:
        lines = list_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the repository list {list_file}: {exc}") from exc
    repos: list[Repo] = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, raw = line.partition("=")
        if not sep:
            name, raw = "", line
        path = Path(raw.strip()).expanduser()
        path = path if path.is_absolute() else list_file.parent / path
        name = name.strip() or Path(raw.strip().rstrip("/")).name
        if not NAME_PATTERN.fullmatch(name):
            raise UsageError(f"{list_file}:{number}: bad repository name {name!r} (letters, digits, '.', '_', '-')")
        repos.append(Repo(name, path))
    if not repos:
        raise UserError(f"the repository list {list_file} names no repository")
    names = [r.name for r in repos]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{list_file}: repository names must be unique, repeated: {', '.join(twice)}")
    return repos


def build_shard(repo: Repo, index_dir: Path, params: IndexParams, workers: int | None = 1) -> ShardOutcome:
    """Build or update the shard of ``repo``; a :class:`UserError` becomes an outcome, not a raise.

    ``workers``: chunking processes (default 1, in this process: in a Ray task, shards are the
    unit of parallelism; ``None``: the builder's pool, as a lone in-process build uses).
    """
    try:
        report = finish_index(plan_shard(repo, index_dir, params, workers), progress=False)
    except UserError as exc:
        return ShardOutcome(repo.name, error=str(exc))
    return outcome_of(repo.name, report)


def outcome_of(name: str, report: IndexReport) -> ShardOutcome:
    """The outcome of the build of shard ``name`` that ``report`` describes."""
    return ShardOutcome(name, None, report.files, report.chunks, report.up_to_date, report.seconds)


def plan_shard(repo: Repo, index_dir: Path, params: IndexParams, workers: int | None = 1) -> IndexPlan:
    """The first step of :func:`build_shard` (:func:`~fastrag.indexing.builder.plan_index`), for a build
    that embeds between its steps; raises :class:`UserError`."""
    return plan_index(
        repo.path,
        shard_dir(index_dir, repo.name),
        params,
        display_root=repo.name,
        progress=False,
        workers=workers,
        text_prefix=repo.name,
    )


def build_in_process(repos: Sequence[Repo], index_dir: Path, params: IndexParams) -> list[ShardOutcome]:
    """:func:`build_shard` of every repository, one after another (each chunks on all cores)."""
    return [build_shard(repo, index_dir, params, workers=None) for repo in repos]


def build_shards(
    repos: Sequence[Repo], index_dir: Path, params: IndexParams, runner: Runner = build_in_process
) -> list[ShardOutcome]:
    """Build every shard with ``runner``, then publish the catalog of the shards that have an index.

    Refuses an ``index_dir`` that holds a single-repository index.
    """
    if (index_dir / CURRENT_FILE).exists():
        raise UsageError(f"{index_dir} holds a single-repository index: give --repos another --index_dir")
    claim_index_dir(index_dir)
    outcomes = runner(repos, index_dir, params)
    shards = []
    for r in sorted(repos, key=lambda r: r.name):
        gen = current_generation(shard_dir(index_dir, r.name))
        if gen is not None:
            entry = {"name": r.name, "dir": f"{SHARDS_DIR}/{r.name}", "generation": gen.name}
            shards.append({**entry, "repo_path": str(r.path.resolve())})
    if shards:
        write_json_atomic(index_dir / CATALOG_FILE, {"format_version": CATALOG_VERSION, "shards": shards}, indent=2)
    return outcomes
