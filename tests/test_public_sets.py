"""The public question sets tracked in ``data/public``: what ``make data`` installs without ``../shared``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "data" / "public"
SHARED_SETS = ROOT.parent / "shared" / "datasets"


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
    if not SHARED_SETS.is_dir():
        pytest.skip("no ../shared/datasets beside the checkout to compare with")
    for path in listed():
        shared = SHARED_SETS / Path(path).relative_to("datasets")
        assert shared.read_bytes() == (PUBLIC / path).read_bytes(), path
