"""The kinds of files fastrag reads: one table for the corpus walk, the chunkers and ``--lang``.

Each :class:`Language` names the file suffixes (and whole file names) it covers and the tree-sitter
grammar, if any, that chunks it. A suffix may belong to several languages (``.h`` is both C and C++ as
far as ``--lang`` is concerned; the first language listing it names its grammar). How a file is chunked
is decided by :func:`fastrag.indexing.chunking.chunk_file` from its suffix.

Every other file counts too, as text (``--lang text``), when its content is text (see
:mod:`fastrag.indexing.corpus`) — except what :data:`KEPT_OUT` names (lock files, minified bundles,
source maps, data formats) and hidden files (``.env``, ``.gitignore``: tool configuration, maybe secrets).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from fastrag.errors import UsageError


@dataclass(frozen=True, slots=True)
class Language:
    """A kind of file: its name, suffixes (lower case, with the dot), whole file names, the tree-sitter
    grammar that chunks it (``""``: chunked as text, or by a chunker of its own), whether it also
    stands for the files no language lists, and whether its files build or configure the project rather
    than hold its code."""

    name: str
    suffixes: tuple[str, ...]
    names: tuple[str, ...] = ()
    grammar: str = ""
    #: also every file no language lists (the text files of any suffix)
    unlisted: bool = False
    #: a build or configuration file: it names the files it compiles, tests and ships without using them
    builds: bool = False


#: JSON files indexed: configuration, by its usual names.
JSON_CONFIG_NAMES = (
    "package.json", "tsconfig.json", "jsconfig.json", "composer.json", "deno.json", "angular.json",
    "lerna.json", "nx.json", "turbo.json", "vercel.json", "renovate.json", "app.json", "manifest.json",
    ".eslintrc.json", ".prettierrc.json", ".babelrc.json", "devcontainer.json", "launch.json",
    "settings.json", "tasks.json", "extensions.json", "pyrightconfig.json", "biome.json",
)  # fmt: skip

#: Every kind of file indexed.
LANGUAGES: tuple[Language, ...] = (
    Language("python", (".py", ".pyi")),
    Language("markdown", (".md", ".markdown")),
    Language("rst", (".rst",)),
    Language("text", (".txt",), unlisted=True),
    Language("cpp", (".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".inl"), grammar="cpp"),
    Language("c", (".c", ".h"), grammar="c"),
    Language("cuda", (".cu", ".cuh"), grammar="cpp"),  # CUDA is C++ with a few keywords
    Language("rust", (".rs",), grammar="rust"),
    Language("go", (".go",), grammar="go"),
    Language("java", (".java",), grammar="java"),
    Language("kotlin", (".kt", ".kts"), grammar="kotlin"),
    Language("javascript", (".js", ".mjs", ".cjs", ".jsx"), grammar="javascript"),
    Language("typescript", (".ts", ".mts", ".cts"), grammar="typescript"),
    Language("tsx", (".tsx",), grammar="tsx"),
    Language("shell", (".sh", ".bash", ".zsh"), grammar="bash"),
    Language("csharp", (".cs", ".csx"), grammar="c_sharp"),
    Language("php", (".php",), grammar="php"),
    Language("ruby", (".rb", ".rake", ".gemspec", ".ru"), names=("Gemfile", "Rakefile"), grammar="ruby"),
    Language("swift", (".swift",), grammar="swift"),
    Language("scala", (".scala", ".sc"), grammar="scala"),
    Language("elixir", (".ex", ".exs"), grammar="elixir"),
    Language("eex", (".eex", ".heex", ".leex")),  # Elixir's templates: HTML with tags, chunked as text
    Language("haskell", (".hs",), grammar="haskell"),
    Language("lua", (".lua",), grammar="lua"),
    Language("zig", (".zig",), grammar="zig"),
    Language("dart", (".dart",), grammar="dart"),
    Language("toml", (".toml",), builds=True),
    Language("yaml", (".yaml", ".yml"), builds=True),
    # JSON by name only: configuration people keep (package.json, tsconfig.json, ...), not the generated
    # data a repository ships as .json (vLLM's 384 kernel tuning tables shifted BM25's statistics enough
    # to cost one public question at rank 1, docs/history.md "Languages")
    Language("json", (), names=JSON_CONFIG_NAMES, builds=True),
    Language("config", (".cfg", ".ini"), builds=True),
    Language("cmake", (".cmake",), names=("CMakeLists.txt",), builds=True),
    Language("bazel", (".bazel", ".bzl"), names=("BUILD", "WORKSPACE"), builds=True),
    Language("jinja", (".jinja",)),
    Language("make", (".mk",), names=("Makefile", "GNUmakefile"), builds=True),
    Language("docker", (), names=("Dockerfile",), builds=True),
)

#: Files kept out of the index though they are text, by the reason the summary gives: (reason, endings of
#: the file name, names: a whole name or the part before its first dot, any case, or in capitals before a
#: dash or underscore: ``LICENSE-APACHE``, ``COPYING_LGPL``). Data formats are
#: generated tables and fixtures rather than prose or code (vLLM's 384 kernel tuning tables shifted BM25's
#: statistics enough to cost one public question at rank 1, docs/history.md "Languages"); JSON
#: configuration by its usual names is indexed all the same. Legal texts are the same boilerplate in
#: every repository, not the project (vLLM's three licences and DCO cost a docs question its place in
#: the first five, docs/retrieval.md "Which files count").
KEPT_OUT: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("lock file", (".lock", ".lockb"), ("package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "go.sum",
                                        "package.resolved", "packages.lock.json", "gradle.lockfile")),
    ("legal text", (), ("license", "licence", "copying", "notice", "dco")),
    ("minified bundle", (".min.js", ".min.mjs", ".min.css", "-min.js", ".bundle.js"), ()),
    ("source map", (".map",), ()),
    ("data format", (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".ipynb", ".svg"), ()),
    # a package's metadata as its build tool writes it: the README again, under another name
    ("generated package metadata", (), ("pkg-info",)),
)  # fmt: skip
#: A name's first part in capitals before a dash or underscore (``LICENSE-APACHE`` → ``LICENSE``).
_CAPITAL_HEAD = re.compile(r"([A-Z]+)[-_]")
#: Suffixes of prose: a kept-out name with one of these (or an unlisted one) is kept out too.
_PROSE = frozenset(
    s for name in ("markdown", "rst", "text") for lang in LANGUAGES if lang.name == name for s in lang.suffixes
)
#: Why an unlisted hidden file is not indexed.
HIDDEN = "hidden file"

#: Language of every name ``--lang`` accepts.
BY_NAME: dict[str, Language] = {lang.name: lang for lang in LANGUAGES}
#: Suffixes of the files indexed.
SUFFIXES: frozenset[str] = frozenset(s for lang in LANGUAGES for s in lang.suffixes)
#: Tree-sitter grammar of every suffix that has one (the first language listing a suffix names it).
GRAMMAR_OF_SUFFIX: dict[str, str] = {
    suffix: lang.grammar for lang in reversed(LANGUAGES) if lang.grammar for suffix in lang.suffixes
}
#: Suffixes and whole names of build and configuration files (:attr:`Language.builds`).
BUILD_SUFFIXES: frozenset[str] = frozenset(s for lang in LANGUAGES if lang.builds for s in lang.suffixes)
BUILD_NAMES: frozenset[str] = frozenset(n for lang in LANGUAGES if lang.builds for n in lang.names)
#: Files indexed by their whole name whatever their suffix.
FILE_NAMES: frozenset[str] = frozenset(n for lang in LANGUAGES for n in lang.names)


def is_listed(name: str) -> bool:
    """Whether a file name (no folder) is of a language of :data:`LANGUAGES` other than the unlisted text."""
    return name in FILE_NAMES or os.path.splitext(name)[1].lower() in SUFFIXES


def kept_out(name: str) -> str | None:
    """Why a file name (no folder) is not indexed whatever its content (:data:`KEPT_OUT`, :data:`HIDDEN`),
    or ``None`` when it is indexed if it reads as text."""
    if name in FILE_NAMES:
        return None
    lower = name.lower()
    stem, suffix = lower.split(".", 1)[0], os.path.splitext(lower)[1]
    by_stem = suffix not in SUFFIXES or suffix in _PROSE  # LICENSE.md yes, license.py (code) no
    head = _CAPITAL_HEAD.match(name)  # LICENSE-MIT: a variant of LICENSE; license-faq.md: a page of its own
    stems = (stem, head.group(1).lower()) if head else (stem,)
    for reason, endings, names in KEPT_OUT:
        if lower in names or (by_stem and any(s in names for s in stems)) or lower.endswith(endings):
            return reason
    if name.startswith(".") and not is_listed(name):
        return HIDDEN
    return None


def is_language(lang: Language, path: str) -> bool:
    """Whether the file at ``path`` (any folder prefix) is of ``lang``."""
    name = path.rsplit("/", 1)[-1]
    if name in FILE_NAMES:
        return name in lang.names
    suffix = os.path.splitext(name)[1].lower()
    return suffix in lang.suffixes or (lang.unlisted and suffix not in SUFFIXES)


def language_arg(value: object, *, prefix: str = "--") -> Language:
    """A ``--lang`` value: a language name or one of its suffixes (``python``, ``py``, ``.rs``), any case."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text:
        if text in BY_NAME:
            return BY_NAME[text]
        suffix = text if text.startswith(".") else f".{text}"
        found = next((lang for lang in LANGUAGES if suffix in lang.suffixes), None)
        if found is not None:
            return found
    raise UsageError(f"{prefix}lang must be one of {', '.join(BY_NAME)} (or a file suffix), got {value!r}")
