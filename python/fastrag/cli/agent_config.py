"""``fastrag mcp --print-config CLIENT``: the exact configuration snippet of each coding agent.

The server is started as the ``fastrag`` console script of this environment or of ``PATH`` (else this
interpreter with ``-m fastrag``), with ``mcp`` and no index argument: it serves the repository of its working
directory (``<repository>/.fastrag/index``, built on first use), which is the project the agent runs in.
VS Code and Cursor may start servers elsewhere, so their snippets name the workspace folder
(``--repo_path ${workspaceFolder}``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from fastrag.errors import UsageError

#: The clients ``--print-config`` knows, and the file each snippet goes into.
CLIENTS = {
    "claude": ".mcp.json in the project (or: claude mcp add fastrag -- <command> mcp)",
    "cursor": ".cursor/mcp.json in the project, or ~/.cursor/mcp.json",
    "codex": "~/.codex/config.toml",
    "vscode": ".vscode/mcp.json in the workspace",
}
#: Where VS Code and Cursor put the workspace's folder in a configuration.
_WORKSPACE = "${workspaceFolder}"


def server_command() -> list[str]:
    """How an agent starts the server: the ``fastrag`` script beside this interpreter (its environment's),
    else the one on ``PATH``, else this interpreter with ``-m fastrag``."""
    beside = Path(sys.executable).parent / "fastrag"
    script = str(beside) if beside.is_file() else shutil.which("fastrag")
    return [script, "mcp"] if script else [sys.executable, "-m", "fastrag", "mcp"]


def agent_config(client: object) -> str:
    """The snippet for ``client`` (one of :data:`CLIENTS`), as that client's file holds it."""
    name = client.strip().lower() if isinstance(client, str) else ""
    if name not in CLIENTS:
        raise UsageError(f"--print-config must be one of {', '.join(CLIENTS)}, got {client!r}")
    command, *args = server_command()
    if name == "codex":
        return "\n".join(["[mcp_servers.fastrag]", f"command = {json.dumps(command)}", f"args = {json.dumps(args)}"])
    if name == "claude":
        return json.dumps({"mcpServers": {"fastrag": {"command": command, "args": args}}}, indent=2)
    pinned = [*args, "--repo_path", _WORKSPACE]
    if name == "cursor":
        return json.dumps({"mcpServers": {"fastrag": {"command": command, "args": pinned}}}, indent=2)
    return json.dumps({"servers": {"fastrag": {"type": "stdio", "command": command, "args": pinned}}}, indent=2)
