"""Shard builds as Ray tasks (the optional ``ray`` extra: ``uv sync --extra ray``).

Each repository's shard is one task — chunking and BM25 in the task, written into the shared
index directory — and the driver writes the catalog (:func:`fastrag.indexing.shards.build_shards`).
A task that dies (worker crash, lost node) is retried by Ray; one that still fails is reported for
its repository, like a repository that cannot be read. The index directory must be reachable under
the same path from every node (a local runtime, or a shared file system on a cluster).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fastrag.errors import UsageError, UserError
from fastrag.indexing.builder import IndexParams
from fastrag.indexing.shards import Repo, Runner, ShardOutcome, build_shard

#: What a task runs for one repository (:func:`~fastrag.indexing.shards.build_shard`).
BuildShard = Callable[[Repo, Path, IndexParams], ShardOutcome]
#: How many times Ray reruns a shard task whose worker died.
MAX_RETRIES = 2
#: ``--ray`` values besides a ``ray://host:port`` address: a fresh local runtime, or the running cluster.
LOCAL = "local"
AUTO = "auto"
#: Ray's switch for re-launching workers through ``uv run`` (see :func:`start`).
UV_RUN_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def available() -> bool:
    """Whether Ray is installed (it is imported here, as :func:`start` needs it: see there)."""
    # read once, when Ray is first imported
    os.environ[UV_RUN_HOOK] = "0"
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def ray_runner(address: str, num_cpus: int | None = None) -> Runner:
    """A :data:`~fastrag.indexing.shards.Runner` on Ray: ``local`` starts a runtime in this
    process (``num_cpus`` workers, default all cores), ``auto`` or ``ray://host:port`` joins a cluster."""
    if not (address in (LOCAL, AUTO) or address.startswith("ray://")):
        raise UsageError(f"--ray must be {LOCAL}, {AUTO} or ray://host:port, got {address!r}")
    if not available():
        raise UserError("--ray needs the ray extra: `uv sync --extra ray` (or `pip install fastrag[ray]`)")

    def run(repos: Sequence[Repo], index_dir: Path, params: IndexParams) -> list[ShardOutcome]:
        import ray

        started = not ray.is_initialized()
        if started:
            start(address, num_cpus)
        try:
            return run_tasks(repos, index_dir.resolve(), params)
        finally:
            if started:
                ray.shutdown()

    return run


def start(address: str = LOCAL, num_cpus: int | None = None) -> None:
    """Start a local Ray runtime (``num_cpus`` workers, default all cores) or join ``address``.

    Workers run this interpreter's environment: Ray's own re-launch of workers through ``uv run``
    (when the driver runs under ``uv run``) is turned off, since those workers start in another
    folder, resolve another environment and never register; Ray reads that switch when first
    imported, so a process must not import Ray before calling this. Ray's start-up lines stay off
    stderr (failures are reported per repository). :class:`UserError` when Ray cannot start or be
    joined.
    """
    if not available():
        raise UserError("--ray needs the ray extra: `uv sync --extra ray` (or `pip install fastrag[ray]`)")
    import ray

    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address == LOCAL:
            ray.init(num_cpus=num_cpus, **options)
        else:
            ray.init(address=address, **options)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot start or join Ray ({address}): {why}") from exc


def run_tasks(
    repos: Sequence[Repo], index_dir: Path, params: IndexParams, build: BuildShard = build_shard
) -> list[ShardOutcome]:
    """One Ray task running ``build`` per repository on the connected runtime; a task that fails
    after its retries becomes its repository's error."""
    import ray

    task = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(build)
    refs = [task.remote(repo, index_dir, params) for repo in repos]
    outcomes: list[ShardOutcome] = []
    for repo, ref in zip(repos, refs):
        try:
            outcomes.append(ray.get(ref))
        except ray.exceptions.RayError as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            outcomes.append(ShardOutcome(repo.name, error=f"the build task failed: {why}"))
    return outcomes
