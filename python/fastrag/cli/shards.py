"""``index --repos``: build one shard per repository, in-process or as Ray tasks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastrag.cli.flags import status

if TYPE_CHECKING:
    from fastrag.indexing.records import IndexParams


def index_shards(list_file: Path, index_dir: Path, params: IndexParams, ray: Any) -> None:
    """``index --repos``: build every shard (in-process, or as Ray tasks), one line per failure."""
    from fastrag.indexing.shards import Runner, build_in_process, build_shards, read_repos

    repos = read_repos(list_file)
    runner: Runner
    if ray is None:
        runner = build_in_process
    else:
        from fastrag.indexing.distributed import ray_runner

        runner = ray_runner(str(ray))
    started = time.perf_counter()
    outcomes = build_shards(repos, index_dir, params, runner)
    failed = [o for o in outcomes if o.error is not None]
    for o in outcomes:
        if o.error is not None:
            status(f"fastrag: error: repository {o.name}: {o.error}")
        else:
            state = "up to date" if o.up_to_date else f"indexed in {o.seconds:.2f} s"
            print(f"{o.name}: {o.files} files, {o.chunks} chunks ({state})")
    built = len(outcomes) - len(failed)
    print(f"{built} of {len(outcomes)} repositories indexed in {time.perf_counter() - started:.2f} s -> {index_dir}")
    if failed:
        raise SystemExit(1)
