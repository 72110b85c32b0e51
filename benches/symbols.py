"""``find_definitions`` on the xrepo benchmark's symbol queries, and ``find_references`` against a whole-word oracle.

Usage: ``.venv/bin/python benches/symbols.py [--xrepo ../shared/xrepo] [--no-write]``

For each of the 41 repositories (``trees/NAME.tar.gz``, unpacked into a temporary folder), every file the
indexer reads gets its definitions exactly as ``index`` finds them (:func:`fastrag.indexing.symbols.file_symbols`,
then :func:`~fastrag.indexing.symbols.symbols_table`, the table a generation stores), and every query of
category ``symbol`` is looked up with :func:`fastrag.retrieval.symbols.find_definitions` (the query as a
name; a query of several words is not a name and is counted apart). A query is a hit when the first
definition covers one of its targets (``relevant`` + ``secondary``) by the benchmark's rule: the path ends
with the target's path, and for a line target the line ranges overlap. Repositories whose language has
no tree-sitter grammar in fastrag yet (only module definitions, from file names) are reported apart.

References: on one repository of each of 5 languages, a frequent identifier of its own code is looked
up with :func:`~fastrag.retrieval.references.find_references`; the oracle is every whole-word occurrence
(``\\bNAME\\b`` on identifier boundaries) in the same files. Recall is the share of the oracle's
occurrences found; precision the share of found ones the oracle has; the occurrences in comments and
strings are counted apart. Writes ``data/bench/results/symbols.json`` and the ``## Symbols`` section of
``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT
from report import header, publish, say

from fastrag.indexing.corpus import decode, read_source, walk
from fastrag.indexing.generations import SymbolTable
from fastrag.indexing.languages import BY_NAME
from fastrag.indexing.symbols import SYMBOL_COLUMNS, file_symbols, symbols_table
from fastrag.retrieval.references import find_references
from fastrag.retrieval.symbols import find_definitions

SECTION = "## Symbols"
#: Repositories and names of the references check: (repository, identifier), five languages.
REFERENCES = (("requests", "Session"), ("gin", "Context"), ("serde", "Serializer"), ("axios", "config"),
              ("commons-lang", "StringUtils"))  # fmt: skip
_SPLIT = re.compile(r"::|->|\.|#|\\")


def covers(path: str, first: int, last: int, target: Any) -> bool:
    """Whether a definition at ``path`` lines ``first..last`` covers a target (the benchmark's rule)."""
    wanted = target if isinstance(target, str) else target["path"]
    ok = path == wanted or path.endswith("/" + wanted) or wanted.endswith("/" + path)
    if not ok or isinstance(target, str):
        return ok
    return first <= int(target["end_line"]) and int(target["start_line"]) <= last


def parsed_language(language: str | None) -> bool:
    """Whether fastrag parses files of ``language`` (Python's ``ast``, or a tree-sitter grammar)."""
    lang = BY_NAME.get(language or "")
    return lang is not None and (lang.name == "python" or bool(lang.grammar))


def mentioned(root: Path, name: str, targets: list[Any]) -> bool:
    """Whether ``name`` occurs as a word in one of the target files under ``root`` (else the annotation is
    of another revision than the tree)."""
    word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)
    for target in targets:
        path = root / (target if isinstance(target, str) else target["path"])
        try:
            if word.search(path.read_text(errors="replace")):
                return True
        except OSError:
            continue
    return False


def repository(tree: Path, name: str) -> tuple[SymbolTable, list[str], dict[str, str], float]:
    """The symbols table of the unpacked repository ``tree`` / ``name``, its paths, texts, and the seconds
    the definitions took."""
    root = tree / name
    entries, _ = walk(root)
    paths: list[str] = []
    texts: dict[str, str] = {}
    per_file = []
    started = time.perf_counter()
    for e in entries:
        text = decode(read_source(root, e.rel_path))
        if text is None:
            continue
        paths.append(e.rel_path)
        texts[e.rel_path] = text
        per_file.append(file_symbols(e.rel_path, text))
    seconds = time.perf_counter() - started
    raw = symbols_table(per_file)
    table = SymbolTable(*(raw[c] for c in SYMBOL_COLUMNS))
    return table, paths, texts, seconds


def measure(xrepo: Path) -> dict[str, Any]:
    """Run every symbol query and the references check."""
    repos = {r["name"]: r for r in json.loads((xrepo / "repos.json").read_text())}
    rows: list[dict[str, Any]] = []
    references: list[dict[str, Any]] = []
    wanted_refs = dict(REFERENCES)
    with tempfile.TemporaryDirectory(prefix="fastrag-symbols-") as tmp:
        for annotated in sorted((xrepo / "annotations").glob("*.json")):
            name = annotated.stem
            queries = [q for q in json.loads(annotated.read_text()) if q["category"] == "symbol"]
            if not queries and name not in wanted_refs:
                continue
            with tarfile.open(xrepo / "trees" / f"{name}.tar.gz") as archive:
                archive.extractall(tmp, filter="data")
            table, paths, texts, seconds = repository(Path(tmp), name)
            language = repos.get(name, {}).get("language")
            say(f"{name}: {len(paths)} files, {len(table)} definitions in {seconds:.1f} s")
            for q in queries:
                text = q["query"].strip()
                parts = [p for p in _SPLIT.split(text) if p]
                row: dict[str, Any] = {"repo": name, "language": language, "query": text}
                row["grammar"] = parsed_language(language)
                targets = list(q.get("relevant", [])) + list(q.get("secondary", []))
                if " " in text or not parts:
                    row["result"] = "not a name"
                elif not mentioned(Path(tmp) / name, parts[-1], targets):
                    row["result"] = "not in the tree"  # the annotation names what this revision no longer has
                else:
                    found = find_definitions(table, paths, parts[-1], tuple(parts[:-1]))
                    first = found[0] if found else None
                    hit = first is not None and any(
                        covers(first.path, first.first_line, first.last_line, t) for t in targets
                    )
                    row["result"] = "hit" if hit else "miss"
                    row["first"] = f"{first.kind} {first.path}:{first.first_line}" if first else None
                    row["definitions"] = len(found)
                rows.append(row)
            if name in wanted_refs:
                references.append(check_references(name, wanted_refs[name], paths, texts))
            for child in Path(tmp).iterdir():
                import shutil

                shutil.rmtree(child)
    return {"queries": rows, "references": references}


def check_references(repo: str, name: str, paths: list[str], texts: dict[str, str]) -> dict[str, Any]:
    """``find_references`` of ``name`` against the whole-word oracle on the same files."""
    oracle = re.compile(rf"(?<![A-Za-z0-9_$]){re.escape(name)}(?![A-Za-z0-9_$])")
    expected = {(p, m.start()) for p in paths for m in oracle.finditer(texts[p])}
    started = time.perf_counter()
    groups, total = find_references(paths, texts.get, name)
    seconds = time.perf_counter() - started
    line_starts = {p: [0] + [m.end() for m in re.finditer("\n", texts[p])] for p in {g.path for g in groups}}
    found = {(g.path, line_starts[g.path][r.line - 1] + r.column - 1) for g in groups for r in g.references}
    places = Counter(r.place for g in groups for r in g.references)
    hits = len(found & expected)
    return {
        "repo": repo,
        "name": name,
        "oracle": len(expected),
        "found": len(found),
        "recall": hits / len(expected) if expected else 1.0,
        "precision": hits / len(found) if found else 1.0,
        "places": dict(places),
        "seconds": seconds,
        "total": total,
    }


def render(figures: dict[str, Any]) -> str:
    """The ``## Symbols`` section."""
    rows = figures["queries"]
    named = [r for r in rows if r["result"] in ("hit", "miss")]
    parsed = [r for r in named if r["grammar"]]
    unparsed = [r for r in named if not r["grammar"]]

    def share(group: list[dict[str, Any]]) -> str:
        hits = sum(r["result"] == "hit" for r in group)
        return f"{hits}/{len(group)} ({hits / len(group):.1%})" if group else "none"

    lines = [
        SECTION,
        "",
        "`find_definitions` on the symbol queries of the 41 xrepo repositories (`benches/symbols.py`): the first",
        "definition covers an annotated target (relevant or secondary; path suffix, line overlap).",
        "",
        header(),
        "",
        "| queries | first definition is the annotated one |",
        "|---|---|",
        f"| every name query | {share(named)} |",
        f"| languages with a grammar (or Python) | {share(parsed)} |",
        f"| languages without a grammar yet (module names only) | {share(unparsed)} |",
        f"| not a name (several words: left to `search`) | {sum(r['result'] == 'not a name' for r in rows)} |",
        (
            f"| the annotated file does not hold the name as an identifier (another revision) | "
            f"{sum(r['result'] == 'not in the tree' for r in rows)} |"
        ),
        "",
    ]
    misses = [r for r in named if r["result"] == "miss"]
    if misses:
        lines.append(
            "Misses: " + "; ".join(f"{r['repo']} `{r['query']}` (first: {r.get('first')})" for r in misses) + "."
        )
        lines.append("")
    lines += [
        "`find_references` against the whole-word oracle (every occurrence of the identifier in the same files):",
        "",
        "| repository | name | oracle | found | recall | precision | code / comment / string / text | ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in figures["references"]:
        p = r["places"]
        split = " / ".join(str(p.get(k, 0)) for k in ("code", "comment", "string", "text"))
        lines.append(
            f"| {r['repo']} | `{r['name']}` | {r['oracle']} | {r['found']} | {r['recall']:.3f} | "
            f"{r['precision']:.3f} | {split} | {r['seconds'] * 1000:.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xrepo", type=Path, default=ROOT.parent / "shared" / "xrepo")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    args = parser.parse_args()
    figures = measure(args.xrepo)
    publish("symbols", figures, SECTION, render(figures), write=not args.no_write)
    say(f"see {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
