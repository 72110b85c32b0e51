"""Definitions and outlines from the symbols table an index keeps (:mod:`fastrag.indexing.symbols`).

:func:`find_definitions` ranks every definition of a name, best first: the name in the same case
before another case, when the name was typed with a capital (``status`` typed in lowercase says nothing
of its case, and finds the class ``Status`` as it finds a function ``status``); then by kind
(:data:`~fastrag.indexing.symbols.KINDS`: a class before a function before a variable, a forward
declaration last); then one outside a version folder (``pydantic/main.py`` before ``pydantic/v1/main.py``),
else in the newest of several versions kept side by side (``v4/`` before ``v3/``); then a definition whose
qualifier (``absl::flat_hash_map``, ``Sinatra::Base``, ``pkg.Class.method``) names its parents or its
folders; then one outside tests, examples and docs; then one in a file named after it (``Axios`` in
``Axios.js``); then the larger (a class over a forward declaration); then by path. :func:`outline` gives a
file's definitions as a tree.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fastrag.errors import UsageError, UserError
from fastrag.indexing.generations import LoadedIndex, SymbolTable
from fastrag.indexing.symbols import KINDS, line_offsets
from fastrag.retrieval.evidence import VERSION_FOLDER, names_identifier

__all__ = [
    "CodeNames",
    "Definition",
    "DefinitionHeads",
    "OutlineNode",
    "code_names",
    "definition_name",
    "find_definitions",
    "outline",
]

#: Longest name looked up.
MAX_NAME_CHARS = 200
#: Folders and file names of code that is not the library itself (ranked after it).
_SECONDARY = re.compile(
    r"(?:^|/)(?:tests?|testing|spec|specs|examples?|samples?|docs?|benchmarks?|bench|fixtures?)/"
    r"|(?:^|/)test_|_test\.|\.test\.|\.spec\.|Tests?\."
)
_SEPARATORS = re.compile(r"::|->|\.|#|\\|/")
_IDENTIFIER = re.compile(r"[^\W\d]\w*|\$\w+|@\w+|\w+[!?]?")
#: A word of a query, as :meth:`CodeNames.respelled` reads it.
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Definition:
    """One definition of a name, as tools show it: path (as results name the file), lines, kind, signature,
    and the names of its enclosing definitions (outermost first, the module excluded)."""

    path: str
    first_line: int
    last_line: int
    kind: str
    name: str
    signature: str
    parents: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        """The JSON form the MCP tool returns."""
        return {**asdict(self), "parents": list(self.parents)}


@dataclass(slots=True)
class OutlineNode:
    """A definition of a file and the definitions inside it."""

    name: str
    kind: str
    first_line: int
    last_line: int
    signature: str
    children: list[OutlineNode] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Nested JSON form (``children`` only when there are some)."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "first_line": self.first_line,
            "last_line": self.last_line,
            "signature": self.signature,
        }
        if self.children:
            out["children"] = [c.as_json() for c in self.children]
        return out


def definition_name(value: Any, *, prefix: str = "") -> tuple[str, tuple[str, ...]]:
    """A looked-up name: its last part and its qualifiers (``a::b.C`` → ``("C", ("a", "b"))``); a
    :class:`UsageError` for an empty or overlong one, or one that holds no identifier."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise UsageError(
            f"{prefix}the name is empty" if isinstance(value, str) else f"{prefix}the name must be text, got {value!r}"
        )
    if len(text) > MAX_NAME_CHARS or any(c.isspace() for c in text):
        raise UsageError(
            f"{prefix}a name is one identifier (qualified or not, at most {MAX_NAME_CHARS} characters), "
            f"got {text[:60]!r}"
        )
    parts = [p for p in _SEPARATORS.split(text) if p]
    if not parts or not _IDENTIFIER.fullmatch(parts[-1]):
        raise UsageError(f"{prefix}{text!r} is not an identifier")
    return parts[-1], tuple(parts[:-1])


def _parents(table: SymbolTable, i: int) -> tuple[str, ...]:
    """Names of the definitions enclosing symbol ``i``, outermost first, the module excluded."""
    names: list[str] = []
    p = table.parent[i]
    seen = 0
    while p >= 0 and seen < 64:
        if table.kind[p] != "module":
            names.append(table.name[p])
        p, seen = table.parent[p], seen + 1
    return tuple(reversed(names))


def _same_case(defined: str, typed: str) -> bool:
    """Whether a definition named ``defined`` is in the case of the name as ``typed``: any case is, for a
    name typed all in lowercase (it asks for no case)."""
    return defined == typed or typed == typed.casefold()


def find_definitions(
    table: SymbolTable, paths: list[str], name: str, qualifiers: tuple[str, ...] = ()
) -> list[Definition]:
    """Every definition of ``name`` (any case) in the symbols ``table`` of an index whose files are
    ``paths``, best first (module docstring)."""
    folded = name.casefold()
    wanted = {q.casefold() for q in qualifiers}
    ranked: list[tuple[tuple[Any, ...], Definition]] = []
    for i, candidate in enumerate(table.name):
        if candidate.casefold() != folded:
            continue
        path = paths[table.file[i]]
        parents = _parents(table, i)
        kind = table.kind[i]
        stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
        context = {p.casefold() for p in parents} | {f.casefold() for f in path.split("/")[:-1]}
        versions = [int(v) for v in VERSION_FOLDER.findall(path)]
        key = (
            not _same_case(candidate, name),
            (bool(versions), -max(versions, default=0)),
            KINDS.index(kind) if kind in KINDS else len(KINDS),
            -len(wanted & context) if wanted else 0,
            bool(_SECONDARY.search(path)),
            stem.casefold() != folded and stem.replace("_", "").casefold() != folded.replace("_", ""),
            -(table.last[i] - table.first[i]),
            path,
            table.first[i],
        )
        ranked.append(
            (key, Definition(path, table.first[i], table.last[i], kind, candidate, table.signature[i], parents))
        )
    ranked.sort(key=lambda pair: pair[0])
    return [d for _, d in ranked]


@dataclass(frozen=True)
class CodeNames:
    """The names an index defines, as a query's words are read against them.

    ``spelled``: each name shaped as a name in code (:func:`~fastrag.retrieval.evidence.names_identifier`:
    ``ModelRunner``, ``max_num_seqs``), casefolded, with the spelling most of its definitions use. ``exact``:
    every name as defined. A query that types such a name in another case (``modelrunner``, ``MODELRUNNER``)
    still names that thing, and is read as if typed as defined: the tokenizer then splits it into its parts
    and the ranker sees a name, as for the name typed right.
    """

    spelled: dict[str, str] = field(default_factory=dict)
    exact: frozenset[str] = frozenset()

    def named_in(self, text: str) -> bool:
        """Whether a word of ``text`` spells, in any case, a name in code the index defines."""
        return any(word.casefold() in self.spelled for word in _WORD.findall(text))

    def respelled(self, text: str) -> str:
        """``text`` with each word typed in no shape of a name in code (``jsonconverter``, ``JSONCONVERTER``),
        and not defined so, that spells such a name in another case, typed as the name is defined
        (``JsonConverter``; ``NIXLConnector`` is ``NixlConnector``). A word typed in a name's shape (``PAGE_SIZE``,
        ``jsonConverter``) stays as typed."""
        return _WORD.sub(lambda m: self._as_defined(m.group(0)), text)

    def _as_defined(self, word: str) -> str:
        spelled = self.spelled.get(word.casefold())
        if spelled is None or spelled == word or word in self.exact or names_identifier(word):
            return word
        return spelled


def code_names(table: SymbolTable) -> CodeNames:
    """The :class:`CodeNames` of the definitions in ``table``."""
    counts = Counter(table.name)
    spelled: dict[str, str] = {}
    for name, _ in counts.most_common():
        if names_identifier(name):
            spelled.setdefault(name.casefold(), name)
    return CodeNames(spelled, frozenset(counts))


#: Definitions of a name whose chunks a one-identifier query's ranking looks at (the best first).
MAX_HEADS = 8


class DefinitionHeads:
    """Which chunks hold the first line of a name's definitions, as :func:`find_definitions` ranks them:
    what a one-identifier query (``HTTPAdapter``, ``Sinatra::Helpers``) asks to see first, rather than a
    chunk that merely lies inside the definition or calls it. ``text_of`` gives an indexed file's text by
    its path in results (``None`` when it changed since), to turn lines into the chunks' offsets."""

    def __init__(self, index: LoadedIndex, text_of: Callable[[str], str | None]) -> None:
        self.index = index
        self.text_of = text_of
        self._chunks_of: dict[int, list[int]] | None = None
        self._file_of: dict[str, int] | None = None

    def grades(self, query: str) -> dict[int, float]:
        """Chunk id → 1.0 for the chunks holding the first line of the name's best definition, 0.5 for
        another definition of the name in the same case (any case for a name typed in lowercase), 0.25 in
        another case; empty when the query is not one name or the index keeps no definitions."""
        try:
            name, qualifiers = definition_name(query)
            found = find_definitions(self.index.symbols, self.index.chunks.paths, name, qualifiers)[:MAX_HEADS]
        except (UsageError, UserError):
            return {}
        chunks = self.index.chunks
        if self._chunks_of is None or self._file_of is None:
            self._file_of = {path: i for i, path in enumerate(chunks.paths)}
            self._chunks_of = {}
            for cid, file in enumerate(chunks.file):
                self._chunks_of.setdefault(file, []).append(cid)
        grades: dict[int, float] = {}
        for rank, d in enumerate(found):
            text = self.text_of(d.path)
            if text is None:
                continue
            starts = line_offsets(text)
            head = starts[d.first_line - 1] if 0 < d.first_line <= len(starts) else len(text)
            grade = 1.0 if rank == 0 else 0.5 if _same_case(d.name, name) else 0.25
            for cid in self._chunks_of.get(self._file_of[d.path], ()):
                if chunks.start[cid] <= head < chunks.end[cid] and grades.get(cid, 0.0) < grade:
                    grades[cid] = grade
        return grades


def outline(index: LoadedIndex, path: str) -> list[OutlineNode]:
    """The definitions of the indexed file ``path`` (as results name it) as a tree, in source order: the
    module's children at the top."""
    paths = index.chunks.paths
    try:
        file = paths.index(path)
    except ValueError:
        raise UsageError(f"{path} is not a file of the index") from None
    table = index.symbols
    nodes: dict[int, OutlineNode] = {}
    roots: list[OutlineNode] = []
    for i, f in enumerate(table.file):
        if f != file or table.kind[i] == "module":
            continue
        node = OutlineNode(table.name[i], table.kind[i], table.first[i], table.last[i], table.signature[i])
        nodes[i] = node
        parent = nodes.get(table.parent[i])
        (parent.children if parent is not None else roots).append(node)
    return roots
