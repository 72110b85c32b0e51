"""The commands coding agents and their users reach for beside ``search``: ``definitions``,
``references``, ``outline``, ``grep``, ``watch`` and ``index_status`` (mixed into
:class:`fastrag.cli.commands.Commands`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastrag.arguments import int_arg
from fastrag.cli.flags import globs, raw_text, status
from fastrag.cli.places import index_arg
from fastrag.cli.signatures import example
from fastrag.errors import NoMatch, UsageError

if TYPE_CHECKING:
    from fastrag.retrieval.lookup import IndexFiles

#: Largest number of results a command prints unless told.
DEFAULT_LIMIT = 50
#: Largest ``--limit``.
MAX_LIMIT = 100_000


def _open(index_dir: str | None) -> IndexFiles:
    """The files of the index the command reads."""
    from fastrag.indexing.catalog import open_index
    from fastrag.indexing.reading import IndexedFiles
    from fastrag.retrieval.lookup import IndexFiles

    return IndexFiles(IndexedFiles(open_index(index_arg(index_dir))))


def _refuse_skipped(files: IndexFiles, paths: list[str]) -> None:
    """A :class:`UserError` (one line, exit 1) naming the files of ``paths`` that could not be read, if any:
    a search that skipped files never looks complete."""
    from fastrag.errors import UserError
    from fastrag.indexing.corpus import skipped_summary

    refused = files.refused_among(paths)
    if refused:
        raise UserError(f"{skipped_summary(refused)} (not searched: run `fastrag index` again)")


class AgentCommands:
    """Symbols and exact search over the live index."""

    @example("definitions main --limit 5")
    @raw_text("name")
    def definitions(self, name: str, *, limit: int = DEFAULT_LIMIT, index_dir: str | None = None) -> None:
        """Print every definition of NAME (class, function, method, type, constant, module), best first.

        Exact case first, then by kind (class, type, function, method, ...), then outside tests; each with
        its path, line range, kind and signature. Example: fastrag definitions Config

        Args:
            name: the name, plain or qualified (Config, app.Config, std::vector).
            limit: how many definitions to print at most (1..100000).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
        """
        from fastrag.retrieval.symbols import definition_name, find_definitions

        wanted, qualifiers = definition_name(name)
        n = int_arg("limit", limit, 1, MAX_LIMIT)
        files = _open(index_dir)
        found = find_definitions(files.index.symbols, files.paths, wanted, qualifiers)
        if not found:
            status(f"no definition of {wanted}")
            return
        for rank, d in enumerate(found[:n], 1):
            inside = f" (in {'.'.join(d.parents)})" if d.parents else ""
            print(f"{rank:3d}. {d.kind} {d.name}{inside}  {d.path}:{d.first_line}-{d.last_line}")
            print(f"       {d.signature}")
        if len(found) > n:
            status(f"{len(found) - n} more definitions (raise --limit)")

    @example("references main --lang python")
    @raw_text("name", "path", "lang")
    def references(
        self,
        name: str,
        *,
        limit: int = 200,
        path: str | None = None,
        lang: str | None = None,
        index_dir: str | None = None,
    ) -> None:
        """Print every occurrence of the identifier NAME, grouped by file: in code, then in comments and
        strings apart (where the file's parser says so; `text` for files fastrag does not parse).

        Example: fastrag references parse_args --lang python

        Args:
            name: the identifier (whole word).
            limit: how many occurrences to print at most (1..100000).
            path: only files matching this glob (repeatable: any may match).
            lang: only files of this language (or a suffix such as py).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
        """
        from fastrag.retrieval.filters import SearchFilter
        from fastrag.retrieval.references import PLACES, find_references
        from fastrag.retrieval.symbols import definition_name

        wanted, qualifiers = definition_name(name)
        if qualifiers:
            raise UsageError(f"references takes one identifier, not a qualified name: {name!r}")
        n = int_arg("limit", limit, 1, MAX_LIMIT)
        chosen = SearchFilter.parse(globs(path), lang)
        files = _open(index_dir)
        groups, total = find_references(files.chosen(chosen), files.read, wanted, n)
        if not groups:
            status(f"no occurrence of {wanted}")
            _refuse_skipped(files, files.chosen(chosen))
            return
        counts = {place: 0 for place in PLACES}
        shown = 0
        for group in groups:
            print(group.path)
            for place in PLACES:
                for ref in group.references:
                    if ref.place == place and shown < n:
                        counts[place] += 1
                        shown += 1
                        print(f"  {ref.line:6d}  {place:<7} {ref.text}")
        summary = ", ".join(f"{c} {p}" for p, c in counts.items() if c)
        more = f"; {total - shown} more (raise --limit)" if total > shown else ""
        status(f"{shown} occurrences in {len(groups)} files ({summary}){more}")
        _refuse_skipped(files, files.chosen(chosen))

    @example("grep 'retr(y|ies)' --regex --lang python")
    @raw_text("pattern", "path", "lang")
    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        path: str | None = None,
        lang: str | None = None,
        limit: int = 1000,
        index_dir: str | None = None,
    ) -> None:
        r"""Print the lines of the indexed files that hold PATTERN, as path:line:text (like `rg -n`); exit status 1
        when no line matches (as grep and rg).

        A literal text unless --regex (the Rust regex crate's syntax, as ripgrep's). Example:
        fastrag grep "TODO" --lang python; fastrag grep "class \w+Error" --regex (flags after PATTERN)

        Args:
            pattern: the text (or with --regex, the regular expression) to find.
            regex: read PATTERN as a regular expression.
            ignore_case: match regardless of case.
            path: only files matching this glob (repeatable: any may match).
            lang: only files of this language (or a suffix such as py).
            limit: how many lines to print at most (1..100000).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
        """
        from fastrag.arguments import bool_arg
        from fastrag.retrieval.filters import SearchFilter
        from fastrag.retrieval.grep import grep, pattern_arg

        text = pattern_arg(pattern, prefix="")
        n = int_arg("limit", limit, 1, MAX_LIMIT)
        chosen = SearchFilter.parse(globs(path), lang)
        as_regex, folded = bool_arg("regex", regex), bool_arg("ignore_case", ignore_case)
        files = _open(index_dir)
        found = grep(files, text, regex=as_regex, ignore_case=folded, search_filter=chosen, limit=n)
        for shown, line, content in found.matches:
            print(f"{shown}:{line}:{content}")
        if found.total > len(found.matches):
            status(f"{found.total - len(found.matches)} more lines (raise --limit)")
        _refuse_skipped(files, files.chosen(chosen))  # files not searched: an error, matches or not
        if not found.matches:
            raise NoMatch(f"no match in {found.files_searched} files")

    @example("watch --repo_path .")
    def watch(self, *, repo_path: str | None = None, index_dir: str | None = None, vectors: str | None = None) -> None:
        """Index the repository, then keep the index fresh until Ctrl-C: every burst of changes (edits, new,
        deleted or renamed files, a branch checkout) becomes one incremental build, published as a new
        generation that search, mcp and serve pick up. Example: fastrag watch

        Args:
            repo_path: the repository (default: data/raw/vllm-0.10.1 in fastrag's checkout, else the
                repository the working directory is in).
            index_dir: where the index is written (default: data/processed in fastrag's checkout or with
                --repo_path, else <repository>/.fastrag/index).
            vectors: which chunks get embedding vectors: docs (the default), none, or another mode.
        """
        from fastrag.cli.places import repo_and_index
        from fastrag.errors import UserError
        from fastrag.indexing.builder import DEFAULT_EMBED, IndexParams
        from fastrag.indexing.records import IndexReport
        from fastrag.indexing.watch import Watcher
        from fastrag.workspace import mark_state_dir

        repo, target, shown = repo_and_index(repo_path, index_dir)
        params = IndexParams(embed=DEFAULT_EMBED if vectors is None else str(vectors))
        watching = False  # the first build's error is raised (one line, exit 1), not reported

        def report(outcome: IndexReport | UserError, changed: int) -> None:
            if isinstance(outcome, UserError):
                if watching:
                    status(f"fastrag: error: {outcome} (the previous index stays live)")
            elif outcome.up_to_date:
                print(f"{changed} changes, index up to date ({outcome.seconds:.2f} s)", flush=True)
            else:
                vectors = f", {outcome.vectors} vectors ({outcome.embedded} embedded)" if outcome.vectors else ""
                print(
                    f"{changed} changes: {outcome.chunked} files chunked, {outcome.removed} removed, "
                    f"{outcome.chunks} chunks{vectors} ({outcome.seconds:.2f} s) -> {outcome.path}",
                    flush=True,
                )

        def searchable(lexical: IndexReport) -> None:
            status(
                f"fastrag: searchable now (lexical, {lexical.lexical_seconds:.2f} s) -> {lexical.lexical_path}; "
                f"embedding {lexical.vectors_pending} chunks for the vectors"
            )

        watcher = Watcher(repo, target, params, display_root=shown, on_build=report, on_lexical=searchable)
        first = watcher.build()
        if isinstance(first, UserError):
            raise first
        mark_state_dir(target)
        watching = True
        status(f"fastrag: watching {watcher.repo} (Ctrl-C stops)")
        watcher.run()

    @example("outline README.md")
    def outline(self, path: str, *, index_dir: str | None = None) -> None:
        """Print the definitions of an indexed file as a tree (classes, their methods, ...), with lines.

        Example: fastrag outline src/app.py

        Args:
            path: the file, as results name it, relative to its repository, or a path on disk.
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
        """
        from fastrag.retrieval.symbols import OutlineNode, outline

        files = _open(index_dir)
        shown = files.path_arg(path, prefix="--")
        files.files.text(shown)  # a file changed or swapped since it was indexed: refused, not outlined
        roots = outline(files.index, shown)
        print(shown)

        def show(nodes: list[OutlineNode], depth: int) -> None:
            for node in nodes:
                print(f"{'  ' * depth}  {node.first_line:5d}-{node.last_line:<5d} {node.kind} {node.name}")
                show(node.children, depth + 1)

        show(roots, 0)
        if not roots:
            status("no definitions")

    @example("index_status --index_dir data/processed")
    def index_status(self, *, index_dir: str | None = None) -> None:
        """Print what the live index holds: its generation, files and chunks, and where its vectors stand:
        lexical only, pending or building (searches rank by words meanwhile), or ready, with counts.

        Example: fastrag index_status

        Args:
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
        """
        from fastrag.indexing.catalog import open_index
        from fastrag.indexing.vector_stage import vector_status

        where = index_arg(index_dir)
        index = open_index(where)
        generation = index.path.name  # of shards: a name of the catalog's generations
        vectors = vector_status(where, generation, index.manifest)
        print(f"generation {generation}: {len(set(index.chunks.paths))} files, {len(index.chunks)} chunks")
        print(f"vectors {vectors['state']}: {vectors['note']}")
        if vectors.get("error"):
            print(f"last vector build stopped: {vectors['error']}")
