"""The catalog of a sharded index, and its shards loaded as one index for searching.

``index --repos`` (:mod:`fastrag.indexing.shards`) writes, under the index directory::

    shards.json        the catalog: format version, and per shard its name, folder and repository
    shards/<name>/     one ordinary index (generations, ``CURRENT``) per repository

Searching reads every shard (or those named) and merges them into one BM25 index scored with the
statistics of the whole (:meth:`fastrag._core.Bm25Index.merge`): a term's idf is the same whichever
shard holds a document, and the ranking is the one a single index over the same files gives.
This module is all the search path needs; it does not import the builder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fastrag import _core
from fastrag.errors import UsageError, UserError
from fastrag.indexing.generations import (
    SHARDS_KEY,
    ChunkTable,
    HeadingTable,
    LoadedIndex,
    current_generation,
    load_index,
)

CATALOG_FILE = "shards.json"
SHARDS_DIR = "shards"
#: Bumped when the catalog's layout changes.
CATALOG_VERSION = 1


def shard_dir(index_dir: Path, name: str) -> Path:
    """The index folder of shard ``name``."""
    return index_dir / SHARDS_DIR / name


def read_catalog(index_dir: Path) -> list[dict[str, Any]] | None:
    """The shards of the catalog of ``index_dir``, or ``None`` when it has none."""
    path = index_dir / CATALOG_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("format_version") != CATALOG_VERSION:
            raise UserError(f"the shard catalog {path} has another format: re-run `index --repos`")
        shards = [dict(s) for s in raw["shards"]]
        for s in shards:
            if not (isinstance(s.get("name"), str) and isinstance(s.get("dir"), str)):
                raise KeyError("name")
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"the shard catalog {path} is unreadable ({exc}): re-run `index --repos`") from exc
    return shards


def live_name(index_dir: Path) -> str | None:
    """A name that changes whenever ``index_dir``'s index does: its live generation's, or for
    shards ``shards-`` and a digest of the catalog's shard generations; ``None`` when it has no index."""
    catalog = read_catalog(index_dir)
    if catalog is None:
        gen = current_generation(index_dir)
        return gen.name if gen is not None else None
    return _set_name(f"{s['name']}:{s.get('generation')}" for s in catalog)


def shard_names(index_dir: Path) -> str:
    """What ``--repo`` may name in ``index_dir``, for an error message: ``shards: a, b`` (or why none)."""
    try:
        catalog = read_catalog(index_dir)
    except UserError as exc:
        return str(exc)
    if catalog is None:
        return f"{index_dir} holds no shards: --repo needs an index built with --repos"
    return f"shards: {', '.join(s['name'] for s in catalog)}"


def _set_name(members: Iterable[str]) -> str:
    return "shards-" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:16]


def open_index(index_dir: Path, repos: Sequence[str] = ()) -> LoadedIndex:
    """The index of ``index_dir`` for searching: its live generation, or, when it holds shards,
    the merge of every shard (of those named in ``repos``, when given)."""
    catalog = read_catalog(index_dir)
    if catalog is None:
        if repos:
            raise UsageError(f"--repo needs an index built with --repos; {index_dir} holds one repository")
        return load_index(index_dir)
    known = [s["name"] for s in catalog]
    unknown = sorted(set(repos) - set(known))
    if unknown:
        raise UsageError(f"no shard named {', '.join(unknown)} in {index_dir} ({shard_names(index_dir)})")
    chosen = [s for s in catalog if not repos or s["name"] in repos]
    return merge_shards(index_dir, [(s["name"], load_index(index_dir / s["dir"])) for s in chosen])


def merge_shards(index_dir: Path, shards: Sequence[tuple[str, LoadedIndex]]) -> LoadedIndex:
    """One searchable index over ``shards`` (name, loaded shard), in order.

    The shards' heading lines are merged the same way (their own BM25, file ids offset like the
    chunks'), so questions asking where something is documented work on shards too; so are the
    chunks' definitions (one document per chunk, in chunk order).
    Its ``path`` is ``index_dir/shards-<digest>``, named after the shards' generations (as
    :func:`live_name`); no folder holds it. Its manifest lists the shards (:data:`SHARDS_KEY`): where
    each shard's files are (:class:`fastrag.indexing.sources.Sources`) and its vectors, searched as one
    (:class:`fastrag.indexing.vectors.ShardedVectors`, loaded on first use). The shards' vectors must
    come from one model.
    """
    if not shards:
        raise UserError(f"no shard in {index_dir}: re-run `index --repos`")
    models = {s.embed_model for _, s in shards if s.has_vectors}
    if len(models) > 1:
        raise UserError(f"the shards of {index_dir} hold vectors of different models: re-run `index --repos`")
    try:
        bm25 = _core.Bm25Index.merge([s.bm25 for _, s in shards])
        heading_bm25 = _core.Bm25Index.merge([s.headings.bm25 for _, s in shards])
        definitions = _core.Bm25Index.merge([s.definitions for _, s in shards])
    except ValueError as exc:
        raise UserError(f"the shards of {index_dir} cannot be merged ({exc}): re-run `index --repos`") from exc
    paths: list[str] = []
    file: list[int] = []
    start: list[int] = []
    end: list[int] = []
    heading_file: list[int] = []
    heading_start: list[int] = []
    heading_end: list[int] = []
    listed: list[dict[str, Any]] = []
    for name, shard in shards:
        base = len(paths)
        listed.append(
            {
                "name": name,
                "display_root": shard.manifest.get("display_root"),
                "repo_path": shard.manifest.get("repo_path"),
                "generation": str(shard.path),
                "first_chunk": len(start),
                "chunks": len(shard.chunks),
                "vectors": int(shard.manifest.get("vectors") or 0),
            }
        )
        paths.extend(shard.chunks.paths)
        file.extend(f + base for f in shard.chunks.file)
        start.extend(shard.chunks.start)
        end.extend(shard.chunks.end)
        heading_file.extend(f + base for f in shard.headings.file)
        heading_start.extend(shard.headings.start)
        heading_end.extend(shard.headings.end)
    manifest: dict[str, Any] = {
        "format_version": shards[0][1].manifest.get("format_version"),
        SHARDS_KEY: listed,
        "vectors": sum(s["vectors"] for s in listed),
        "embed_model": next(iter(models), ""),
    }
    name = _set_name(f"{n}:{s.path.name}" for n, s in shards)
    headings = HeadingTable(heading_file, heading_start, heading_end, heading_bm25)
    return LoadedIndex(index_dir / name, manifest, ChunkTable(paths, file, start, end), bm25, headings, definitions)
