"""Shared fixtures: a small repository written in the session, the CLI run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "raw" / "vllm-0.10.1"
DATASETS = ROOT / "data" / "datasets"
#: The data held beside the checkout (the xrepo trees, the held datasets): present in CI, absent in a fresh clone.
SHARED = ROOT.parent / "shared"


def in_ci() -> bool:
    """Whether the suite runs in CI (``$CI`` set to a true value), where ``../shared`` must be present."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_path(relative: str) -> Path:
    """``../shared/RELATIVE`` for a test that needs it: skipped with the reason when it is absent outside CI
    (a fresh clone has no ``../shared``), a failure when it is absent in CI."""
    path = SHARED / relative
    if not path.exists():
        why = f"{path} is missing (the data held beside the checkout: ../shared)"
        if in_ci():
            pytest.fail(f"{why}; CI must provide it")
        pytest.skip(why)
    return path


#: How long a server started by a test may take to say where it listens.
START_TIMEOUT_S = 60

SAMPLE_FILES = {
    "pkg/engine.py": '''"""The engine."""

import os


class LLMEngine:
    """Runs requests."""

    def __init__(self, model: str) -> None:
        self.model = model

    def add_request(self, request_id: str, prompt: str) -> None:
        """Queue a request for the scheduler."""
        self.queue.append((request_id, prompt))


def load_lora_adapter(name: str, path: str) -> dict[str, str]:
    """Load a LoRA adapter from disk at runtime."""
    return {"name": name, "path": os.path.abspath(path)}
''',
    "pkg/sampling.py": '''"""Sampling parameters."""


class SamplingParams:
    """Temperature, top_p and friends: café ☕ naïve."""

    def __init__(self, temperature: float = 1.0, top_p: float = 1.0) -> None:
        self.temperature = temperature
        self.top_p = top_p
''',
    "docs/lora.md": """# LoRA adapters

## Dynamic loading

Send a POST request to `/v1/load_lora_adapter` with the adapter name and path to
load an adapter while the server runs.

## Unloading

Use `/v1/unload_lora_adapter` to remove it again.
""",
    "docs/install.md": """# Installation

Install with pip: `pip install vllm`. A GPU with compute capability 7.0 or higher is needed.
""",
}


@dataclass(frozen=True)
class CliResult:
    """Exit status and output of one CLI run."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        """Non-empty stderr lines."""
        return [line for line in self.err.splitlines() if line.strip()]


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> CliResult:
    """Run ``python -m fastrag ARGS`` in ``cwd`` as a user would."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "fastrag", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        env=env,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def searched_dataset(indexed: Path, name: str, questions: list[dict[str, Any]]) -> tuple[Path, Path]:
    """Write ``questions`` as the dataset ``name`` under ``indexed``, run ``search_dataset`` on it (k = 3)
    there, and return the dataset's path and its search results' path."""
    dataset = indexed / "sets" / f"{name}.json"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    dataset.write_text(json.dumps({"rag_questions": questions}))
    assert run_cli("search_dataset", "--dataset_path", str(dataset), "--k", "3", cwd=indexed).code == 0
    return dataset, indexed / "data/output/search_results" / f"{name}.json"


def stop_process(proc: subprocess.Popen[Any], timeout: float = 15, terminate: bool = True) -> None:
    """End a server started by a test: SIGTERM (unless it is ending by itself), then SIGKILL after ``timeout`` s."""
    if terminate:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_server(root: Path, *flags: str) -> Iterator[str]:
    """``python -m fastrag serve --port 0 *flags`` in ``root``; yields the address it serves (loopback)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrag", "serve", "--port", "0", *flags],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"},
    )
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    try:
        line = first[0].strip() if first else ""
        if not line.startswith(("fastrag serving on http://127.0.0.1:", "fastrag serving on http://0.0.0.0:")):
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"the server did not start: stdout {line!r}, stderr {err[-2000:]!r}")
        yield "http://127.0.0.1:" + line.rsplit(":", 1)[1]
    finally:
        stop_process(proc)
    assert proc.returncode in (0, -15), proc.returncode


def write_repo(root: Path, files: dict[str, str] = SAMPLE_FILES) -> Path:
    """Write ``files`` under ``root`` and return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    return root


def linked_project(tmp_path: Path) -> tuple[Path, Path]:
    """``(project, elsewhere)``: two sample repositories in ``elsewhere/corpus`` and ``elsewhere/other``,
    each linked from the project's ``data/raw/`` (as an operator links a corpus unpacked outside)."""
    root, outside = tmp_path / "project", tmp_path / "elsewhere"
    write_repo(outside / "corpus")
    write_repo(outside / "other")
    (root / "data/raw").mkdir(parents=True)
    (root / "data/raw/corpus").symlink_to(outside / "corpus", target_is_directory=True)
    (root / "data/raw/other").symlink_to(outside / "other", target_is_directory=True)
    return root, outside


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A working directory holding ``repo/`` (the sample repository), not yet indexed."""
    write_repo(tmp_path / "repo")
    return tmp_path


@pytest.fixture()
def indexed(workdir: Path) -> Path:
    """``workdir`` with the sample repository indexed into ``data/processed``."""
    result = run_cli("index", "--repo_path", "repo", cwd=workdir)
    assert result.code == 0, result.err
    return workdir


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The vLLM corpus unpacked by ``make data``; its absence is a setup error, not a skip."""
    if not CORPUS.is_dir():
        pytest.fail(f"{CORPUS} is missing: run `make data` first")
    return CORPUS


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a model hub, nor pick up the user's model choice."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("FASTRAG_MODEL", raising=False)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3 GGUF (written once per session, ~0.1 s)."""
    from tiny_qwen3 import write_tiny_qwen3

    return write_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3") / "tiny-qwen3.gguf")


# ----------------------------------------------------------------------------- MCP tool results


def payload(result: Any) -> dict[str, Any]:
    """A successful tool result's structured content."""
    assert not result.is_error, result.content
    content: dict[str, Any] = result.structured_content or json.loads(result.content[0].text)
    return content


def error_text(result: Any) -> str:
    """A tool error's message."""
    assert result.is_error, result
    return str(result.content[0].text)
