"""Install once, use anywhere: the built wheel in a fresh environment (offline) gives a working ``fastrag``.

Builds the wheel (``maturin build --release``: seconds once ``make install`` compiled the core), installs
it with ``uv pip install --offline`` into a new virtual environment (its dependencies as ``uv.lock`` pins
them, from uv's cache), then, outside the checkout, in a copy
of ``rust/`` and of one xrepo tree: ``fastrag index``, ``search``, ``definitions``, ``grep``, and
``fastrag mcp`` driven by the official MCP client SDK. The xrepo tree lies in ``../shared``: without it (a fresh
clone) its test is skipped, in CI (``CI=true``) it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import shared_path

ROOT = Path(__file__).resolve().parents[1]
#: One xrepo tree (JavaScript with Markdown docs), held beside the checkout in ``../shared``.
XREPO_TREE = "xrepo/trees/axios.tar.gz"


def run(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its stderr when it fails."""
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{args}: {proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The ``fastrag`` script of a fresh environment holding only the wheel and its dependencies."""
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build the environment (make install installs it)"
    tmp = tmp_path_factory.mktemp("wheel")
    build_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "FASTRAG_MODEL")}
    build_env["UV_CACHE_DIR"] = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
    maturin = Path(sys.executable).parent / "maturin"
    run(maturin, "build", "--release", "--out", tmp / "dist", cwd=ROOT, env=build_env)
    # the user's programs see a home of their own: nothing of fastrag is written outside the test's folder
    env = dict(build_env, HOME=str(tmp / "home"), FASTRAG_MODELS_DIR=str(tmp / "models"), HF_HUB_OFFLINE="1")
    (wheel,) = (tmp / "dist").glob("fastrag-*.whl")
    # the dependencies as uv.lock pins them (the model packages' unused runtimes overridden away), by URL:
    # uv's cache holds them, so the install needs no network
    run(uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--format", "pylock.toml", "--quiet",
        "-o", tmp / "pylock.toml", cwd=ROOT, env=build_env)  # fmt: skip
    run(uv, "venv", "--quiet", "--python", sys.executable, tmp / "venv", cwd=tmp, env=env)
    python = tmp / "venv" / "bin" / "python"
    run(uv, "pip", "install", "--quiet", "--offline", "--python", python, "-r", tmp / "pylock.toml", cwd=tmp, env=env)
    run(uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python, wheel, cwd=tmp, env=env)
    script = tmp / "venv" / "bin" / "fastrag"
    assert script.is_file()
    return script, env


def test_fresh_environment_embeds_a_repository_with_docs(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """From inside a copied xrepo tree (``../shared``): the default index embeds its Markdown by the packaged model."""
    tree = shared_path(XREPO_TREE)
    script, env = installed
    with tarfile.open(tree) as archive:
        archive.extractall(tmp_path, filter="data")
    axios = tmp_path / "axios"
    vectors = run(script, "index", cwd=axios, env=env)
    assert "vectors:" in vectors.stdout
    assert "lib/core/Axios.js:" in run(script, "definitions", "Axios", cwd=axios / "lib", env=env).stdout
    assert run(script, "search", "how do interceptors work", cwd=axios, env=env).stdout.strip()


def test_fresh_environment_indexes_searches_and_serves(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """From inside a copy of ``rust/``: index, search, definitions, grep; then MCP over stdio."""
    script, env = installed
    rust = tmp_path / "rust"
    shutil.copytree(ROOT / "rust", rust)

    built = run(script, "index", "--vectors", "none", cwd=rust, env=env)
    assert "indexed" in built.stdout and (rust / ".fastrag/index/CURRENT").is_file()
    found = run(script, "search", "checksum of the stored index", "--k", "3", cwd=rust / "bm25", env=env)
    assert " store.rs:" in found.stdout
    defined = run(script, "definitions", "Bm25Index", cwd=rust, env=env)
    assert defined.stdout.split("\n")[0].split()[1:3] == ["type", "Bm25Index"]
    grepped = run(script, "grep", "pub fn encode", cwd=rust, env=env)
    assert grepped.stdout.startswith("store.rs:")

    params = StdioServerParameters(command=str(script), args=["mcp"], cwd=rust, env=env)

    async def main() -> dict[str, Any]:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"search", "find_definitions", "grep", "outline", "find_references"} <= tools
            result = await session.call_tool("find_definitions", {"name": "encode"})
            bad = await session.call_tool("grep", {"pattern": "(", "regex": True})
            assert bad.is_error
            assert result.structured_content is not None and not result.is_error
            out: dict[str, Any] = result.structured_content
            return out

    with open(tmp_path / "mcp-stderr.txt", "w") as log:
        answer = anyio.run(main)
    assert answer["definitions"][0]["path"] == "store.rs"
