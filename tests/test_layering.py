"""Data flows one way: no module of the package imports from a later stage of the pipeline.

:data:`STAGES` is the order, earliest first. Every module of ``python/fastrag`` is parsed with
``ast`` and every import of a ``fastrag`` module is checked, wherever it is written: at module
level, under ``if TYPE_CHECKING:``, or inside a function (a lazy import, for start-up time, is
fine when it points down the chain, never when it points up). Inside a stage, modules are ordered
too (:data:`STAGES` lists them); a package's ``__init__`` may import its own modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "fastrag"

#: The pipeline, earliest stage first; inside a stage, modules (or sub-packages) earliest first.
STAGES: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "fastrag._core",
            "fastrag.errors",
            "fastrag.faults",
            "fastrag.package_index",
            "fastrag.workspace",
            "fastrag.model_packages",
            "fastrag.config",
            "fastrag.schemas",
            "fastrag.lines",
            "fastrag.indexing.languages",
            "fastrag.arguments",
        ],
    ),
    (
        "indexing",
        [
            "fastrag.indexing.ignores",
            "fastrag.indexing.corpus",
            "fastrag.indexing.chunking.packer",
            "fastrag.indexing.chunking.python",
            "fastrag.indexing.chunking.markdown",
            "fastrag.indexing.chunking.layers",
            "fastrag.indexing.chunking.bridges",
            "fastrag.indexing.chunking.grammars",
            "fastrag.indexing.chunking.syntax",
            "fastrag.indexing.chunking",
            "fastrag.indexing.storage",
            "fastrag.indexing.workers",
            "fastrag.indexing.embed",
            "fastrag.indexing.vectors",
            "fastrag.indexing.symbols",
            "fastrag.indexing.records",
            "fastrag.indexing.generations",
            "fastrag.indexing.sources",
            "fastrag.indexing.reading",
            "fastrag.indexing.texts",
            "fastrag.indexing.lexical",
            "fastrag.indexing.vector_stage",
            "fastrag.indexing.catalog",
            "fastrag.indexing.builder",
            "fastrag.indexing.shards",
            "fastrag.indexing.distributed",
            "fastrag.indexing.watch",
        ],
    ),
    (
        "retrieval",
        [
            "fastrag.retrieval.evidence",
            "fastrag.retrieval.query",
            "fastrag.retrieval.filters",
            "fastrag.retrieval.lexical",
            "fastrag.retrieval.fusion",
            "fastrag.retrieval.batching",
            "fastrag.retrieval.symbols",
            "fastrag.retrieval.precision",
            "fastrag.retrieval.retriever",
            "fastrag.retrieval.snippets",
            "fastrag.retrieval.lookup",
            "fastrag.retrieval.references",
            "fastrag.retrieval.grep",
        ],
    ),
    (
        "evaluation",
        [
            "fastrag.evaluation.datasets",
            "fastrag.evaluation.recall",
            "fastrag.evaluation.search_dataset",
            "fastrag.evaluation.answer_metrics",
        ],
    ),
    (
        "answering",
        [
            "fastrag.answering.cleanup",
            "fastrag.answering.prompt",
            "fastrag.answering.citations",
            "fastrag.answering.support",
            "fastrag.answering.lead",
            "fastrag.answering.grounding",
            "fastrag.answering.model_files",
            "fastrag.answering.compiled",
            "fastrag.answering.generator",
            "fastrag.answering.answer",
        ],
    ),
    (
        "server",
        [
            "fastrag.server.errors",
            "fastrag.server.cache",
            "fastrag.server.texts",
            "fastrag.server.auth",
            "fastrag.server.safety",
            "fastrag.server.schemas",
            "fastrag.server.live",
            "fastrag.server.results",
            "fastrag.server.answers",
            "fastrag.server.services",
            "fastrag.server.responses",
            "fastrag.server.routes",
            "fastrag.server.app",
            "fastrag.server.timeouts",
            "fastrag.server.run",
        ],
    ),
    ("agents", ["fastrag.server.budget", "fastrag.server.agent_tools", "fastrag.server.mcp"]),
    (
        "command line",
        [
            "fastrag.cli.flags",
            "fastrag.cli.signatures",
            "fastrag.cli.argv",
            "fastrag.cli.help",
            "fastrag.cli.shards",
            "fastrag.cli.places",
            "fastrag.cli.agent_config",
            "fastrag.cli.agents",
            "fastrag.cli.commands",
            "fastrag.cli",
            "fastrag.__main__",
            "fastrag",
        ],
    ),
]

#: Position of every listed module: (stage, place in the stage).
RANK: dict[str, tuple[int, int]] = {
    name: (stage, place) for stage, (_, names) in enumerate(STAGES) for place, name in enumerate(names)
}


def module_name(path: Path) -> str:
    """``python/fastrag/retrieval/query.py`` → ``fastrag.retrieval.query`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def rank_of(name: str) -> tuple[int, int] | None:
    """The rank of a module: its own; for a package whose modules are listed, that of its last one
    (its ``__init__`` comes after them); else that of the nearest listed package holding it."""
    while name:
        if name in RANK:
            return RANK[name]
        members = [rank for listed, rank in RANK.items() if listed.startswith(name + ".")]
        if members:
            return max(members)
        name = name.rpartition(".")[0]
    return None


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of the source tree."""
    relative = Path(*name.split("."))
    base = PACKAGE.parent / relative
    return base.with_suffix(".py").is_file() or base.with_suffix(".pyi").is_file() or base.is_dir()


def imports(tree: ast.AST) -> list[tuple[int, str]]:
    """Every ``fastrag`` module imported anywhere in ``tree``, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "fastrag"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "fastrag":
                continue
            for alias in node.names:  # `from fastrag.server import schemas` imports a module
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if is_module(sub) else node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_stage() -> None:
    """A new module must be placed in :data:`STAGES`, or the check below would not see it."""
    unplaced = [module_name(p) for p in SOURCES if rank_of(module_name(p)) is None]
    assert unplaced == []


def test_stages_name_existing_modules() -> None:
    """Every listed name exists (a rename must update the list)."""
    missing = [name for name in RANK if not is_module(name)]
    assert missing == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_point_down_the_pipeline(path: Path) -> None:
    """No import of a later stage (or a later module of the same stage), at any level."""
    importer = module_name(path)
    own = rank_of(importer)
    assert own is not None
    package_init = path.name == "__init__.py"
    upward: list[str] = []
    for line, target in imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if target.startswith("."):
            upward.append(f"line {line}: relative import {target} (write the full name)")
            continue
        if package_init and target.startswith(importer + "."):
            continue
        theirs = rank_of(target)
        if theirs is None:
            upward.append(f"line {line}: {target} is not a module of any stage")
        elif theirs > own:
            upward.append(f"line {line}: {target} ({STAGES[theirs[0]][0]}) runs back up the pipeline")
    assert upward == [], f"{importer}: " + "; ".join(upward)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser finds imports inside functions and ``TYPE_CHECKING`` blocks, and ranks them."""
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from fastrag.server.app import create_app\n"
        "def f():\n    from fastrag.answering import answer\n    import fastrag.retrieval.query\n"
    )
    found = imports(ast.parse(code))
    assert found == [(3, "fastrag.server.app"), (5, "fastrag.answering.answer"), (6, "fastrag.retrieval.query")]
    retrieval = RANK["fastrag.retrieval.retriever"]
    assert [t for _, t in found if (rank_of(t) or (0, 0)) > retrieval] == [
        "fastrag.server.app",
        "fastrag.answering.answer",
    ]
