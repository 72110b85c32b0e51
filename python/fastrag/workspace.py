"""Where fastrag's defaults point: fastrag's own checkout, or the repository the user works in.

Two layouts, decided from the working directory once per process:

* **project layout** — fastrag's own checkout, or any folder laid out like it (a ``data/`` folder holding a
  fastrag index in ``processed/``, the corpus ``raw/vllm-0.10.1`` or the question sets ``datasets/``; or
  fastrag's sources, ``python/fastrag/``; not merely a ``data/raw`` or ``data/models``): the
  exercise's defaults, relative to the working directory: the corpus ``data/raw/vllm-0.10.1``, the index
  ``data/processed``, the models ``data/models``.
* **repository layout** — anywhere else: the repository is the nearest folder at or above the working
  directory that holds ``.fastrag`` or ``.git`` (else the working directory itself); ``fastrag index``
  indexes it into ``<repository>/.fastrag/index`` (with a ``.gitignore`` so that git ignores it), and
  every command reads that index. Results name files relative to the repository. Models (compiled
  caches, exports) go to ``$FASTRAG_MODELS_DIR``, else ``$XDG_CACHE_HOME/fastrag/models``
  (``~/.cache/fastrag/models``); the packaged models need nothing there.

An explicit ``--repo_path`` without ``--index_dir`` keeps the documented default ``data/processed``
below the working directory (as in the project layout), and an explicit ``--index_dir`` always wins.

:func:`default_index_note` is the one line that says when a defaulted index is probably not the one the
user means (issue "No silent wrong index").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

#: Folder of fastrag's files inside a repository (repository layout).
STATE_DIR = ".fastrag"
#: The index's folder inside :data:`STATE_DIR`.
INDEX_SUBDIR = "index"
#: Markers of a repository's root, nearest first.
ROOT_MARKERS = (STATE_DIR, ".git", ".hg", ".svn")
#: The project layout's defaults, relative to the working directory.
PROJECT_REPO_PATH = Path("data/raw/vllm-0.10.1")
PROJECT_INDEX_DIR = Path("data/processed")
PROJECT_MODELS_DIR = Path("data/models")
#: What in ``data/`` marks the project layout: a fastrag index (its generation pointer, or a sharded index's
#: catalog: ``generations.CURRENT_FILE``, ``catalog.CATALOG_FILE``), the exercise's corpus or question sets.
#: Not a bare ``data/raw``, ``data/processed`` or ``data/models``: many repositories have those (a data
#: science layout), and fastrag must not take them for its checkout and write there.
_PROJECT_DATA = (
    "processed/CURRENT", "processed/shards.json", "raw/vllm-0.10.1", "datasets/AnsweredQuestions",
    "datasets/UnansweredQuestions",
)  # fmt: skip


def is_project_layout(cwd: Path | None = None) -> bool:
    """Whether ``cwd`` (default: the working directory) is laid out like fastrag's checkout."""
    here = Path.cwd() if cwd is None else cwd
    if (here / "python" / "fastrag" / "__init__.py").is_file():
        return True
    return any((here / "data" / marker).exists() for marker in _PROJECT_DATA)


def repository_root(start: Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the working directory) holding one of
    :data:`ROOT_MARKERS`, absolute; ``None`` when there is none."""
    here = Path(os.path.abspath(Path.cwd() if start is None else start))
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return None


@dataclass(frozen=True, slots=True)
class Workspace:
    """The defaults of one process: repository to index, index folder, models folder; ``project``:
    the project layout (:func:`is_project_layout`); ``root``: the repository of the repository layout."""

    project: bool
    repo_path: Path
    index_dir: Path
    models_dir: Path
    root: Path | None

    @classmethod
    def detect(cls, cwd: Path | None = None) -> Workspace:
        """The workspace of ``cwd`` (default: the working directory)."""
        here = Path.cwd() if cwd is None else cwd
        if is_project_layout(here):
            return cls(True, PROJECT_REPO_PATH, PROJECT_INDEX_DIR, PROJECT_MODELS_DIR, None)
        root = repository_root(here) or Path(os.path.abspath(here))
        return cls(False, root, root / STATE_DIR / INDEX_SUBDIR, user_models_dir(), root)


def user_models_dir() -> Path:
    """Models folder outside the project layout: ``$FASTRAG_MODELS_DIR``, else the user's cache."""
    chosen = os.environ.get("FASTRAG_MODELS_DIR")
    if chosen:
        return Path(chosen)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "fastrag" / "models"


def models_dir_of(root: Path) -> Path:
    """The models folder of a server whose paths are relative to ``root`` (``serve``, ``mcp``): ``root/data/models``
    when ``root`` is fastrag's checkout (:func:`is_project_layout`), else the user's (:func:`user_models_dir`),
    so that nothing but ``.fastrag/`` is ever written into a user's repository."""
    absolute = Path(os.path.abspath(root))
    return absolute / PROJECT_MODELS_DIR if is_project_layout(absolute) else user_models_dir()


def index_dir_default(index_dir: object, repo_path: object = None) -> Path:
    """The index folder a command uses: ``index_dir`` when given; else ``data/processed`` when
    ``repo_path`` was given explicitly (the documented default); else the workspace's."""
    if index_dir is not None:
        return Path(str(index_dir))
    if repo_path is not None:
        return PROJECT_INDEX_DIR
    return Workspace.detect().index_dir


def mark_state_dir(index_dir: Path) -> None:
    """Have git ignore a repository's ``.fastrag`` folder (a ``.gitignore`` of ``*`` in it), once."""
    state = index_dir.parent
    if state.name != STATE_DIR:
        return
    ignore = state / ".gitignore"
    if not ignore.exists():
        state.mkdir(parents=True, exist_ok=True)
        ignore.write_text("# fastrag's index of this repository (fastrag index)\n*\n")


def _indexed_repository(index_dir: Path, root: Path) -> Path | None:
    """The repository the live generation of ``index_dir`` was built from (its manifest's ``repo_path``);
    ``None`` when unknown, or when its results name files by a path that exists below ``root`` (the
    project layout: ``data/raw/vllm-0.10.1``, perhaps a link to a corpus unpacked elsewhere)."""
    try:
        name = (index_dir / "CURRENT").read_text().strip()
        manifest = json.loads((index_dir / name / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    repo, shown = manifest.get("repo_path"), manifest.get("display_root")
    if not isinstance(repo, str) or not repo:
        return None
    if isinstance(shown, str) and shown and not Path(shown).is_absolute() and (root / shown).exists():
        return None
    return Path(repo)


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both resolved)."""
    inner, outer = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return inner == outer or outer in inner.parents


def default_index_note(index_dir: Path, cwd: Path | None = None) -> str | None:
    """A one-line note when the *defaulted* index ``index_dir`` is probably not the one meant, else ``None``.

    The repository the user works in is the nearest folder at or above ``cwd`` holding ``.fastrag`` or
    ``.git``. The note says so when that repository has a live index of its own that is not
    ``index_dir``, or when ``index_dir``'s repository is neither that repository nor inside it.
    """
    here = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    root = repository_root(here)
    if root is None:
        return None
    using = Path(os.path.abspath(index_dir))
    own = root / STATE_DIR / INDEX_SUBDIR
    if own != using and (own / "CURRENT").is_file():
        return (
            f"fastrag: note: using the index in {index_dir}, but {root} has its own in {own} (pass --index_dir {own})"
        )
    indexed = _indexed_repository(using, root)
    if indexed is not None and not _within(indexed, root) and not _within(root, indexed):
        return (
            f"fastrag: note: the index in {index_dir} is of {indexed}, not of {root} where you work "
            f"(run `fastrag index` there, or pass --index_dir)"
        )
    return None
