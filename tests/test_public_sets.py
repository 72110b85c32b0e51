"""The public question sets tracked in ``data/public``: what ``make data`` installs without ``../shared``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conftest import shared_path

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "data" / "public"


def listed() -> dict[str, str]:
    """``SHA256SUMS`` as {path under data/public: sha256}."""
    lines = (PUBLIC / "SHA256SUMS").read_text().splitlines()
    return {path: digest for digest, path in (line.split(maxsplit=1) for line in lines if line.strip())}


def test_every_public_set_matches_its_checksum() -> None:
    sums = listed()
    files = {str(p.relative_to(PUBLIC)) for p in (PUBLIC / "datasets").rglob("*.json")}
    assert set(sums) == files and len(files) == 4
    for path, digest in sums.items():
        assert hashlib.sha256((PUBLIC / path).read_bytes()).hexdigest() == digest, path
        assert "rag_questions" in json.loads((PUBLIC / path).read_text())


def test_the_tracked_sets_are_the_shared_ones() -> None:
    """Beside ``../shared``, the copy never drifts from the sets it was taken from."""
    shared_sets = shared_path("datasets")
    for path in listed():
        shared = shared_sets / Path(path).relative_to("datasets")
        assert shared.read_bytes() == (PUBLIC / path).read_bytes(), path


def test_what_needs_shared_skips_without_it_and_fails_in_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh clone (no ``../shared``) skips with the reason; CI (``CI=true``) must have it, so fails."""
    import conftest

    monkeypatch.setattr(conftest, "SHARED", tmp_path)
    (tmp_path / "datasets").mkdir()
    assert shared_path("datasets") == tmp_path / "datasets"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="xrepo/repos.json is missing"):
        shared_path("xrepo/repos.json")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must provide it"):
        shared_path("xrepo/repos.json")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        shared_path("xrepo/repos.json")
