"""Shard builds as Ray tasks (the optional ``ray`` extra: ``uv sync --extra ray``).

Each repository's shard is one task — chunking and BM25 in the task, written into the shared
index directory — and the driver writes the catalog (:func:`fastrag.indexing.shards.build_shards`).

A task that dies (worker crash, lost node) is retried by Ray; one that still fails is reported for
its repository, like a repository that cannot be read. The index directory must be reachable under
the same path from every node (a local runtime, or a shared file system on a cluster).

With vectors on, a shard build is two tasks around one batched Ray Data stage
(:func:`run_with_vectors`): a planning task per shard chunks its repository and names the texts its
embedding cache lacks; one Ray Data stage embeds the texts of all the shards, in batches, on a pool of
actors that each load the model once; then a finishing task per shard builds its BM25 and vector
indexes from its plan (kept in Ray's object store between the tasks) and those vectors, and publishes
the shard. A text's vector depends on the text alone (:mod:`fastrag.indexing.embed`), so the shards
equal those an in-process build makes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fastrag.config import DEFAULT_MODELS_DIR
from fastrag.errors import UsageError, UserError
from fastrag.indexing.builder import IndexParams, IndexPlan, finish_index, missing_texts
from fastrag.indexing.embed import MODEL_MAX_TOKENS, Embedder, ModelFiles, resolve_model
from fastrag.indexing.shards import Repo, Runner, ShardOutcome, build_shard, outcome_of, plan_shard
from fastrag.indexing.vectors import DIM, text_key

#: What a task runs for one repository (:func:`~fastrag.indexing.shards.build_shard`).
BuildShard = Callable[[Repo, Path, IndexParams], ShardOutcome]
#: How many times Ray reruns a shard task whose worker died.
MAX_RETRIES = 2
#: ``--ray`` values besides a ``ray://host:port`` address: a fresh local runtime, or the running cluster.
LOCAL = "local"
AUTO = "auto"
#: Ray's switch for re-launching workers through ``uv run`` (see :func:`start`).
UV_RUN_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
#: Texts per batch of the Ray Data embedding stage (an actor embeds a batch in one call, which groups
#: them by padded length itself).
EMBED_BATCH = 256


def available() -> bool:
    """Whether Ray is installed (it is imported here, as :func:`start` needs it: see there)."""
    # read once, when Ray is first imported
    os.environ[UV_RUN_HOOK] = "0"
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def ray_runner(address: str, num_cpus: int | None = None, models_dir: Path = DEFAULT_MODELS_DIR) -> Runner:
    """A :data:`~fastrag.indexing.shards.Runner` on Ray: ``local`` starts a runtime in this
    process (``num_cpus`` workers, default all cores), ``auto`` or ``ray://host:port`` joins a cluster.
    With vectors on, the embedding model is the one of ``models_dir`` (:func:`run_with_vectors`)."""
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
            if params.embed_spec() is not None:
                return run_with_vectors(repos, index_dir.resolve(), params, models_dir.resolve())
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
        raise UserError(f"cannot start or join Ray ({address}): {_first_line(exc)}") from exc


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
            outcomes.append(ShardOutcome(repo.name, error=f"the build task failed: {_first_line(exc)}"))
    return outcomes


def run_with_vectors(
    repos: Sequence[Repo], index_dir: Path, params: IndexParams, models_dir: Path = DEFAULT_MODELS_DIR
) -> list[ShardOutcome]:
    """Build every shard with its vectors on the connected runtime: planning tasks, one Ray Data
    embedding stage for the texts missing from every shard's cache, finishing tasks (module docstring).

    A task that fails after its retries, or a repository that cannot be indexed, becomes its
    repository's error; :class:`UserError` when there is no embedding model at all.
    """
    import ray

    files = resolve_model(models_dir)
    plan = ray.remote(max_retries=MAX_RETRIES, num_cpus=1, num_returns=2)(_plan)
    # two object refs per shard (num_returns=2): the plan, kept in the object store, and its texts
    planned: list[Any] = [plan.remote(repo, index_dir, params, files) for repo in repos]
    errors: dict[str, str] = {}
    wanted: dict[str, list[str]] = {}
    for repo, (_, texts_ref) in zip(repos, planned):
        try:
            texts = ray.get(texts_ref)
        except ray.exceptions.RayError as exc:
            errors[repo.name] = f"the build task failed: {_first_line(exc)}"
            continue
        if isinstance(texts, str):
            errors[repo.name] = texts
        else:
            wanted[repo.name] = texts
    every_text = list(dict.fromkeys(t for texts in wanted.values() for t in texts))
    try:
        vectors = embed_stage(every_text, params.embed_tokens, files, models_dir / ".ov-cache") if every_text else {}
    except ray.exceptions.RayError as exc:
        why = f"the embedding stage failed: {_first_line(exc)}"
        errors.update({name: why for name in wanted if wanted[name]})
        vectors = {}
    finish = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(_finish)
    finishing = {}
    for repo, (plan_ref, _) in zip(repos, planned):
        if repo.name in errors:
            continue
        texts = wanted[repo.name]
        keys = [text_key(t, params.embed_tokens) for t in texts]
        rows = np.stack([vectors[t] for t in texts]) if texts else np.zeros((0, DIM), dtype=np.float32)
        finishing[repo.name] = finish.remote(repo.name, plan_ref, files, keys, rows)
    outcomes: list[ShardOutcome] = []
    for repo in repos:
        if repo.name in errors:
            outcomes.append(ShardOutcome(repo.name, error=errors[repo.name]))
            continue
        try:
            outcomes.append(ray.get(finishing[repo.name]))
        except ray.exceptions.RayError as exc:
            outcomes.append(ShardOutcome(repo.name, error=f"the build task failed: {_first_line(exc)}"))
    return outcomes


def embed_stage(
    texts: Sequence[str], max_tokens: int, files: ModelFiles, cache_dir: Path | None = None
) -> dict[str, np.ndarray]:
    """The vector of every text of ``texts``, embedded by a Ray Data stage on the connected runtime:
    batches of :data:`EMBED_BATCH` texts, on a pool of actors (one per CPU, at most one per batch),
    each loading the model of ``files`` once (``cache_dir``: OpenVINO's compiled-model cache).

    Ray's core worker logs one line on stderr when the stage starts (``Actor ... has constructor
    arguments in the object store and max_restarts > 0``, ray-project/ray#53727): Ray Data places every
    actor's arguments there and restarts a dead actor (retrying its batch), as Ray reruns a dead task;
    the line is Ray's, not an error of the build. An exception in an actor fails the stage, and every
    shard with texts to embed reports it."""
    import ray
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    batches = -(-len(texts) // EMBED_BATCH)
    cpus: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call,unused-ignore]
    actors = max(1, min(batches, int(cpus.get("CPU", 1))))

    embedded = ray.data.from_items([{"text": t} for t in texts]).map_batches(
        EmbedBatch,
        fn_constructor_kwargs={"files": files, "max_tokens": max_tokens, "cache_dir": cache_dir},
        batch_size=EMBED_BATCH,
        batch_format="numpy",
        concurrency=actors,
        num_cpus=1,
    )
    return {str(row["text"]): np.asarray(row["vector"], dtype=np.float32) for row in embedded.iter_rows()}


class EmbedBatch:
    """A Ray Data actor of :func:`embed_stage`: the model loaded once, then one batch of texts per call."""

    def __init__(self, files: ModelFiles, max_tokens: int = MODEL_MAX_TOKENS, cache_dir: Path | None = None) -> None:
        self.embedder = Embedder(files, cache_dir=cache_dir)
        self.max_tokens = max_tokens

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        return {"text": batch["text"], "vector": self.embedder.embed(texts, self.max_tokens)}


class EmbeddedTexts:
    """Vectors embedded beforehand (by :func:`embed_stage`), handed to a build as its embedder
    (:class:`~fastrag.indexing.embed.TextEmbedder`): it looks texts up, it never runs the model."""

    def __init__(self, files: ModelFiles, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        self.files = files
        self._vectors = dict(zip(keys, vectors))

    def embed(self, texts: Sequence[str], max_tokens: int = MODEL_MAX_TOKENS, progress: bool = False) -> np.ndarray:
        """The vectors of ``texts``; :class:`UserError` for one not embedded beforehand."""
        try:
            rows = [self._vectors[text_key(t, max_tokens)] for t in texts]
        except KeyError:
            raise UserError("a text was not embedded by the embedding stage: re-run `index --repos`") from None
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, DIM), dtype=np.float32)


def _plan(
    repo: Repo, index_dir: Path, params: IndexParams, files: ModelFiles
) -> tuple[IndexPlan | None, list[str] | str]:
    """Planning task: the shard's plan and the texts its cache lacks, or ``None`` and why it failed."""
    try:
        plan = plan_shard(repo, index_dir, params)
        return plan, missing_texts(plan, files)
    except UserError as exc:
        return None, str(exc)


def _finish(name: str, plan: IndexPlan, files: ModelFiles, keys: list[bytes], vectors: np.ndarray) -> ShardOutcome:
    """Finishing task: the shard built from its plan and the vectors of the texts its cache lacked."""
    try:
        report = finish_index(plan, embedder=EmbeddedTexts(files, keys, vectors), progress=False)
    except UserError as exc:
        return ShardOutcome(name, error=str(exc))
    return outcome_of(name, report)


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
