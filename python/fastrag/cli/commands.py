"""The commands of ``python -m fastrag`` (Python Fire) and :func:`main`.

Each public method of :class:`Commands` is a command; its signature is its command line. The
annotations say what each flag means and its default is the real one (``--help`` shows both,
:mod:`fastrag.cli.help`); :func:`main` checks the command line against the signature before the
command runs (:mod:`fastrag.cli.argv`), then Fire parses the values as typed (``3`` an int, ``abc``
text) and the checks of :mod:`fastrag.arguments` accept them as the annotated type or refuse them.
A :class:`~fastrag.errors.UserError` becomes one line on stderr and a non-zero exit status;
nothing else is caught here.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from fastrag.arguments import MIN_CHUNK_SIZE, bool_arg, int_arg, mode_arg, path_arg, replace_surrogates, text_arg
from fastrag.cli.agents import AgentCommands
from fastrag.cli.argv import Help, parse
from fastrag.cli.flags import (
    dropped_count,
    dropped_list,
    fire_error,
    globs,
    host_names,
    raw_text,
    repo_names,
    status,
    target_size,
)
from fastrag.cli.help import command_help, overview
from fastrag.cli.places import index_arg, output_arg, repo_and_index, served_index
from fastrag.cli.shards import index_shards
from fastrag.cli.signatures import commands, example
from fastrag.config import (
    DEFAULT_ANSWERS_DIR,
    DEFAULT_BATCH_SIZE,
    DEFAULT_K,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MODE,
    DEFAULT_SEARCH_RESULTS_DIR,
    MAX_BATCH_SIZE,
    MAX_CHUNK_SIZE,
    MAX_K,
    MAX_NEW_TOKENS,
    SearchMode,
)
from fastrag.errors import NoMatch, UsageError, UserError
from fastrag.indexing.records import DEFAULT_EMBED
from fastrag.workspace import mark_state_dir

#: The last line of ``search``'s output: what its scores mean (see ``search --help``).
SCORE_NOTE = "(scores order this list only: fused ranks ~0.03, BM25 ~1; not comparable across queries)"


class Commands(AgentCommands):
    """fastrag: retrieval-augmented generation for codebases."""

    @example("index --vectors docs")
    def index(
        self,
        *,
        max_chunk_size: int = MAX_CHUNK_SIZE,
        repo_path: Path | None = None,
        index_dir: Path | None = None,
        vectors: str = DEFAULT_EMBED,
        repos: Path | None = None,
        ray: str | None = None,
        no_ignore: bool = False,
    ) -> None:
        """Chunk and index a repository (incremental: unchanged files are reused).

        Args:
            max_chunk_size: largest chunk in characters (50..2000).
            repo_path: the repository to index (default: data/raw/vllm-0.10.1 in fastrag's checkout, else the
                repository of the working directory, the nearest folder above holding .git or .fastrag).
            index_dir: where the index is written (default: data/processed in fastrag's checkout or with
                --repo_path, else <repository>/.fastrag/index).
            vectors: which chunks get embedding vectors: docs (Markdown/reST), docs+bridges, prose (also .txt)
                or none (a lexical index).
            repos: a file listing repositories (`path` or `name=path` per line): one shard each.
            ray: with --repos, build the shards as Ray tasks: local, auto or ray://host:port.
            no_ignore: also index what .gitignore, .git/info/exclude and .fastragignore files leave out.
        """
        from fastrag.indexing.builder import IndexParams, IndexReport, build_index

        size = int_arg("max_chunk_size", max_chunk_size, MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)
        embed = text_arg("--vectors", vectors).strip()
        params = IndexParams(max_chunk_size=size, target_size=target_size(size), embed=embed)
        ignore = not bool_arg("no_ignore", no_ignore)
        if repos is not None:
            if not ignore:
                raise UsageError("--no_ignore is for one repository (--repo_path): shards honour their ignore files")
            index_shards(path_arg("repos", repos), index_arg(index_dir), params, ray)
            return
        if ray is not None:
            raise UsageError("--ray needs --repos")
        from fastrag.indexing.catalog import CATALOG_FILE

        repo, target, shown = repo_and_index(repo_path, index_dir)
        if (target / CATALOG_FILE).exists():
            raise UsageError(f"{target} holds shards: index them with --repos, or give another --index_dir")

        def searchable(lexical: IndexReport) -> None:
            """The lexical generation is live, the vectors are next: say so before the model's wait."""
            mark_state_dir(target)
            status(
                f"fastrag: searchable now (lexical, {lexical.lexical_seconds:.2f} s): {lexical.chunks} chunks "
                f"-> {lexical.lexical_path}; embedding {lexical.vectors_pending} chunks for the vectors"
            )

        report = build_index(repo, target, params, display_root=shown, ignore=ignore, on_lexical=searchable)
        mark_state_dir(target)
        if report.up_to_date:
            print(f"index up to date: {report.files} files, {report.chunks} chunks ({report.seconds:.2f} s)")
        else:
            print(
                f"indexed {report.files} files into {report.chunks} chunks in {report.seconds:.2f} s "
                f"({report.chunked} chunked, {report.reused} reused, {report.removed} removed) -> {report.path}"
            )
            if report.vectors or report.vectors_skipped:
                skipped = f"; {report.vectors_skipped} skipped (the model cannot encode them)"
                print(
                    f"vectors: {report.vectors} chunks, {report.embedded} embedded in {report.embed_seconds:.2f} s"
                    f"{skipped if report.vectors_skipped else ''}"
                )
        if report.skipped:
            from fastrag.indexing.corpus import skipped_summary

            status(skipped_summary(report.skipped))

    @example('search "how are errors reported" --k 5 --path "src/**"')
    @raw_text("query", "path", "lang", "repo")
    def search(
        self,
        query: str,
        *,
        k: int = DEFAULT_K,
        index_dir: Path | None = None,
        mode: SearchMode = DEFAULT_MODE,
        path: str | None = None,
        lang: str | None = None,
        repo: str | None = None,
        json: bool = False,
    ) -> None:
        """Print the k spans that best answer QUERY as path:first_line-last_line, each with its line that best
        matches QUERY.

        Each span shows its score, which orders this list and nothing more: a fused reciprocal-rank
        score (about 0.02-0.04) when words and vectors both rank, a BM25-based one (about 1) when words
        alone decide. Scores of two queries are not comparable; the last line says so.

        Args:
            query: the question.
            k: how many spans (1..10).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
            mode: lexical, vector or hybrid (hybrid is lexical on an index without vectors).
            path: only files matching this glob (repeatable: any may match), e.g. 'docs/**' or '*.rs'.
            lang: only files of this language (python, markdown, cpp, rust, ... or a suffix such as py).
            repo: of an index built with --repos, search only this shard (repeatable).
            json: print the hits as one JSON array instead: path, character offsets start and end (as the
                datasets' results give them), first_line, last_line, score.
        """
        from fastrag.retrieval.filters import SearchFilter
        from fastrag.retrieval.retriever import Retriever, clean_query

        text = text_arg("the query", query)
        n = int_arg("k", k, 1, MAX_K)
        chosen = SearchFilter.parse(globs(path), lang)
        as_json = bool_arg("json", json)
        where = index_arg(index_dir)
        retriever = Retriever.open(where, repos=repo_names(repo, where))
        hits = retriever.search(text, n, mode_arg(mode), allowed=chosen.mask(retriever.index))
        from fastrag.indexing.corpus import Skipped, skipped_summary
        from fastrag.indexing.reading import FileRefused
        from fastrag.retrieval.snippets import shown_hits

        refused: dict[str, Skipped] = {}

        def read(path: str) -> str:
            """The file's text as indexed, from any working directory; a refused one noted (the location alone)."""
            try:
                return retriever.files.text(path)
            except FileRefused as exc:  # swapped or changed since indexing
                refused.setdefault(path, Skipped(exc.rel_path, exc.reason))
                raise

        searched = retriever.searched(text)
        if searched != clean_query(text):
            status(f"searched for: {searched}")
        shown = shown_hits(hits, read, searched)
        if as_json:
            import json as json_module

            print(json_module.dumps([hit.as_json() for hit in shown], ensure_ascii=False, indent=1))
            return
        if not hits:
            status("no match")
            return
        for rank, hit in enumerate(shown, 1):
            print(f"{rank:2d}. {hit.location}  score {hit.score:.3g}")
            if hit.line:
                print(f"      {hit.line}")
        if refused:
            status(f"no snippet from {skipped_summary(list(refused.values())).removeprefix('skipped ')}")
        if int(retriever.index.manifest.get("vectors_pending") or 0):
            from fastrag.indexing.vector_stage import vector_status

            status(f"fastrag: {vector_status(where, retriever.index.path.name, retriever.index.manifest)['note']}")
        print(SCORE_NOTE)

    @example("search_dataset --dataset_path data/datasets/UnansweredQuestions/dataset_docs_public.json --k 10")
    @raw_text("path", "lang", "repo")
    def search_dataset(
        self,
        *,
        dataset_path: Path,
        k: int = DEFAULT_K,
        save_directory: Path | None = None,
        index_dir: Path | None = None,
        mode: SearchMode = DEFAULT_MODE,
        path: str | None = None,
        lang: str | None = None,
        repo: str | None = None,
    ) -> None:
        """Retrieve the k best spans for every question of a dataset and save them as JSON.

        Args:
            dataset_path: a dataset JSON file (AnsweredQuestions or UnansweredQuestions).
            k: spans per question (1..10).
            save_directory: folder of the output file, named after the dataset (default:
                data/output/search_results in fastrag's checkout, else <repository>/.fastrag/output/search_results).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
            mode: lexical, vector or hybrid.
            path: only files matching this glob (repeatable: any may match).
            lang: only files of this language (or a suffix such as py).
            repo: of an index built with --repos, search only this shard (repeatable).
        """
        from fastrag.evaluation.search_dataset import search_dataset
        from fastrag.retrieval.filters import SearchFilter

        started = time.perf_counter()
        where = index_arg(index_dir)
        target, n = search_dataset(
            path_arg("dataset_path", dataset_path),
            int_arg("k", k, 1, MAX_K),
            output_arg("save_directory", save_directory, DEFAULT_SEARCH_RESULTS_DIR),
            where,
            progress=True,
            mode=mode_arg(mode),
            search_filter=SearchFilter.parse(globs(path), lang),
            repos=repo_names(repo, where),
        )
        print(f"saved {n} results to {target} ({time.perf_counter() - started:.2f} s)")

    @example(
        "evaluate --student_search_results_path data/output/search_results/dataset_docs_public.json "
        "--dataset_path data/datasets/AnsweredQuestions/dataset_docs_public.json --show_missed"
    )
    def evaluate(
        self,
        *,
        student_search_results_path: Path,
        dataset_path: Path,
        show_missed: bool = False,
    ) -> None:
        """Print recall@1/3/5/10 of a results file against a dataset with ground truth, and why the
        ground-truth spans missed in the first 5 are missed.

        Args:
            student_search_results_path: output of search_dataset.
            dataset_path: the AnsweredQuestions dataset.
            show_missed: also list the questions not fully found in the top 10, each missed span with its cause.
        """
        from fastrag.evaluation.datasets import check_results, ground_truth, load_dataset, load_search_results
        from fastrag.evaluation.recall import MISS_K, evaluate, miss_cause

        listed = bool_arg("show_missed", show_missed)
        results_file = path_arg("student_search_results_path", student_search_results_path)
        dataset_file = path_arg("dataset_path", dataset_path)
        results = load_search_results(results_file)
        truth = ground_truth(load_dataset(dataset_file), dataset_file)
        check_results(results, truth, results_file)
        report = evaluate(results.search_results, truth)
        print(f"{dataset_file.name}: {report.questions} questions, {report.answered} with results, k={results.k}")
        print("  ".join(f"recall@{k}: {v:.3f}" for k, v in report.recall.items()))
        causes = "; ".join(f"{cause}: {n}" for cause, n in report.causes.items())
        print(f"missed in the first {MISS_K}: {sum(report.causes.values())} of {report.spans} spans ({causes})")
        if listed:
            by_id = {r.question_id: r for r in results.search_results}
            by_q = {q.question_id: q for q in truth}
            for qid in report.missed:
                q = by_q[qid]
                got = by_id.get(qid)
                retrieved = got.retrieved_sources if got else []
                print(f"- {q.question}")
                for s in q.sources:
                    cause = miss_cause(retrieved, s)
                    print(
                        f"    truth:     {s.file_path}:{s.first_character_index}-{s.last_character_index}"
                        + (f"  ({cause})" if cause else "")
                    )
                for s in retrieved[:3]:
                    print(f"    retrieved: {s.file_path}:{s.first_character_index}-{s.last_character_index}")

    @example('answer "How are errors reported?" --k 5 --model smollm2')
    @raw_text("question")
    def answer(
        self,
        question: str,
        *,
        k: int = DEFAULT_K,
        model: str | None = None,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        index_dir: Path | None = None,
        save_directory: Path | None = None,
        show_dropped: bool = False,
    ) -> None:
        """Answer QUESTION from the k best spans, citing them, and save the answer as JSON.

        The first lines are the sources' own sentences or block that best answer the question, with their
        citations; only when none does is the model asked, and then only its sentences that the sources
        support are shown. More quoted source lines follow, then the cited sources. The
        file is named after the question (its first words and a hash: answer-how-do-i-...-3f2a9c01d4.json),
        so another question never replaces it; asking the same question again does, and says so.

        Args:
            question: the question.
            k: spans to retrieve (0..10; 0 answers with a fixed message without loading a model).
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported or exportable, else the packaged SmolLM2, saying so on stderr).
            max_new_tokens: bound on the answer's length in tokens (1..1024).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
            save_directory: folder of the answer's file (default: output/search_results_and_answer beside the
                index folder, so data/output/search_results_and_answer for data/processed).
            show_dropped: also list on stderr the sentences of the model's text not shown, each with why.
        """
        from fastrag.answering.answer import answer
        from fastrag.cli.places import IndexTexts
        from fastrag.lines import cite_lines

        text = text_arg("the question", question)
        n = int_arg("k", k, 0, MAX_K)
        limit = int_arg("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        name = None if model is None else text_arg("--model", model)
        listed = bool_arg("show_dropped", show_dropped)
        live = sys.stdout.isatty()

        where = index_arg(index_dir)
        texts = IndexTexts(where)  # citations are shown as lines (the saved answer keeps characters)

        def show(piece: str) -> None:
            sys.stdout.write(cite_lines(piece, texts))
            sys.stdout.flush()

        folder = None if save_directory is None else path_arg("save_directory", save_directory)
        result = answer(
            text, n, name, where, folder, limit,
            show if live else None, on_note=lambda note: status(f"fastrag: {note}"),
        )  # fmt: skip
        if live and result.load is not None:
            print()
        else:
            print(cite_lines(result.body, texts))
        if result.sources:
            print("\nSources:")
            for excerpt in result.cited:
                print(f"  {cite_lines(excerpt.citation, texts)}")
        dropped_count(result.dropped)
        if listed:
            dropped_list(result.dropped)
        if result.load is not None:
            how = {"hit": " (compiled cache)", "saved": " (compiled cache saved)"}.get(result.load.compiled, "")
            asked = (
                f"prompt {result.prompt_tokens} tokens" if result.prompt_tokens else "nothing asked: the lead answers"
            )
            status(f"{result.load.name}: loaded in {result.load.seconds:.1f} s{how}, {asked}")
        replaced = ", replacing the earlier answer to this question" if result.replaced else ""
        status(f"saved to {result.saved_to} ({result.seconds:.1f} s{replaced})")

    @example("answer_dataset --student_search_results_path data/output/search_results/dataset_docs_public.json")
    def answer_dataset(
        self,
        *,
        student_search_results_path: Path,
        save_directory: Path | None = None,
        model: str | None = None,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        show_dropped: bool = False,
    ) -> None:
        """Answer every question of a search-results file with its retrieved sources; save them as JSON.

        The output keeps the input's file name; an interrupted run resumes where it stopped. The sentences
        of the model's text not shown (unsupported by the sources, ...) are counted on stderr.

        Args:
            student_search_results_path: output of search_dataset.
            save_directory: folder of the output file (default: data/output/search_results_and_answer in
                fastrag's checkout, else <repository>/.fastrag/output/search_results_and_answer).
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported or exportable, else the packaged SmolLM2, saying so on stderr).
            max_new_tokens: bound on each answer's length in tokens (1..1024).
            batch_size: prompts generated together (1..256).
            show_dropped: also list on stderr each sentence not shown, with its question id and why.
        """
        from fastrag.answering.answer import answer_dataset

        limit = int_arg("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        batch = int_arg("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        listed = bool_arg("show_dropped", show_dropped)
        report = answer_dataset(
            path_arg("student_search_results_path", student_search_results_path),
            output_arg("save_directory", save_directory, DEFAULT_ANSWERS_DIR),
            None if model is None else text_arg("--model", model),
            limit,
            batch,
            on_note=lambda note: status(f"fastrag: {note}"),
        )
        resumed = f", {report.resumed} resumed" if report.resumed else ""
        print(
            f"saved {report.questions} answers to {report.target} ({report.generated} answered, "
            f"{report.asked} of them with the model's text{resumed}, "
            f"{report.without_sources} without sources, {report.seconds:.1f} s)"
        )
        dropped_count([v for verdicts in report.dropped.values() for v in verdicts])
        for question_id, verdicts in report.dropped.items() if listed else ():
            dropped_list(verdicts, f"{question_id}: ")

    @example(
        "evaluate_answers --answers_path data/output/search_results_and_answer/dataset_docs_public.json "
        "--dataset_path data/datasets/AnsweredQuestions/dataset_docs_public.json"
    )
    def evaluate_answers(self, *, answers_path: Path, dataset_path: Path) -> None:
        """Print how well the answers of an answer_dataset output recall the dataset's reference answers.

        Key-term recall, word recall, median answer length, degenerate answers and citation validity
        (defined in fastrag/evaluation/answer_metrics.py); then the check of every shown sentence against
        the spans it cites, read from the files: support rate, invented links, truncated sentences, empty
        code blocks (fastrag/answering/support.py). Run it where the answers' source paths resolve.

        Args:
            answers_path: output of answer_dataset.
            dataset_path: the AnsweredQuestions dataset (questions with reference answers).
        """
        from fastrag.answering.grounding import audit_answer
        from fastrag.answering.prompt import SpanReader
        from fastrag.answering.support import Audit
        from fastrag.evaluation.answer_metrics import score_answers, summarize
        from fastrag.evaluation.datasets import ground_truth, load_answers, load_dataset

        answers_file = path_arg("answers_path", answers_path)
        dataset_file = path_arg("dataset_path", dataset_path)
        answers = load_answers(answers_file)
        references = ground_truth(load_dataset(dataset_file), dataset_file)
        report = summarize(score_answers(answers.search_results, references))
        bad = ", ".join(f"{n} {kind}" for kind, n in sorted(report.degenerate.items())) or "none"
        print(f"{dataset_file.name}: {report.questions} answers scored")
        print(
            f"key-term recall: {report.key_recall:.3f} ({report.key_questions} questions)  "
            f"word recall: {report.word_recall:.3f} ({report.word_questions} questions)"
        )
        print(f"median answer: {report.median_words:g} words  degenerate: {bad}")
        print(
            f"citations: {report.valid_citations}/{report.citations} valid ({report.citation_validity:.3f}), "
            f"{report.answers_citing} answers cite"
        )
        checked, reader = Audit(), SpanReader()
        for record in answers.search_results:
            checked.add(audit_answer(record.answer, reader, record.question))
        with_ = checked.answers_with
        print(
            f"support: {checked.supported}/{checked.units} shown sentences supported by their cited spans "
            f"({checked.support_rate:.3f})  invented links: {checked.invented_links} "
            f"({with_.get('invented link', 0)} answers)  truncated sentences: {checked.truncated} "
            f"({with_.get('truncated', 0)} answers)  empty code blocks: {checked.empty_code_blocks} "
            f"({with_.get('empty code block', 0)} answers)"
        )

    @example("serve --port 5000 --model smollm2")
    @raw_text("token", "allowed_host")
    def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 5000,
        index_dir: Path | None = None,
        model: str | None = None,
        token: str | None = None,
        allowed_host: str | None = None,
    ) -> None:
        """Serve the HTTP API and the page (search, streamed answers, indexing) until Ctrl-C.

        One process keeps the index (reloaded when it changes on disk) and the model (loaded on the
        first question) in memory. Paths given to the API must lie in data/.

        Args:
            host: address to listen on (default 127.0.0.1: this machine only). Another address
                requires a bearer token on every request but /healthz.
            port: TCP port (0..65535; 0 picks a free one).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported, else the packaged SmolLM2; /healthz names it).
            token: the bearer token (default: $FASTRAG_TOKEN, else one generated and printed on stderr
                when the host is not loopback); open the page as /?token=<token>.
            allowed_host: a Host name the server answers to (repeatable; default: the loopback names
                and the bound address).
        """
        address = text_arg("--host", host).strip()
        number = int_arg("port", port, 0, 65535)
        folder = index_arg(index_dir)
        name = None if model is None else text_arg("--model", model)
        hosts = host_names(allowed_host)
        from fastrag.server import serve  # FastAPI is imported by this command only

        serve(address, number, folder, name, token=token, allowed_hosts=hosts)  # the token checked there

    @example("mcp --transport http --port 8765")
    def mcp(
        self,
        *,
        transport: str = "stdio",
        host: str = "127.0.0.1",
        port: int = 8765,
        index_dir: Path | None = None,
        model: str | None = None,
        token: str | None = None,
        allowed_host: str | None = None,
        repo_path: Path | None = None,
        print_config: str | None = None,
        watch: bool = False,
    ) -> None:
        """Serve the index to coding agents as MCP tools: search, read_span, find_definitions, find_references,
        outline, grep, answer, index_status.

        The index is opened once and followed when it is rebuilt; the model loads on the first answer.
        See docs/mcp.md for an agent's configuration.

        Args:
            transport: stdio (default: the agent starts this process) or http (streamable HTTP on HOST:PORT/mcp).
            host: address to listen on with http (default 127.0.0.1: this machine only).
            port: TCP port with http (0..65535; 0 picks a free one).
            index_dir: where the index lives (default: data/processed in fastrag's checkout, else
                <repository>/.fastrag/index).
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported, else the packaged SmolLM2; index_status names it).
            token: with http, the bearer token (as for serve: default $FASTRAG_TOKEN, else one generated and
                printed on stderr when the host is not loopback).
            allowed_host: with http, a Host name the server answers to (repeatable; as for serve).
            repo_path: serve this repository's index, <repository>/.fastrag/index, built on first use (default:
                the repository of the working directory).
            print_config: print the configuration snippet of an agent (claude, cursor, codex, vscode) on stdout,
                the file it goes into on stderr, and exit.
            watch: keep the index fresh while serving: every burst of file changes is one incremental
                build (index_status says how fresh it is and which files are pending).
        """
        if print_config is not None:
            from fastrag.cli.agent_config import CLIENTS, agent_config

            snippet, where = agent_config(print_config), CLIENTS[str(print_config).strip().lower()]
            status(f"fastrag: put this in {where}")
            print(snippet)
            return
        chosen = text_arg("--transport", transport).strip()
        address = text_arg("--host", host).strip()
        number = int_arg("port", port, 0, 65535)
        name = None if model is None else text_arg("--model", model)
        hosts = host_names(allowed_host)
        folder = served_index(index_dir, repo_path)
        from fastrag.server.mcp import run  # the MCP SDK is imported by this command only

        run(chosen, address, number, folder, name, token=token, allowed_hosts=hosts, watch=bool_arg("watch", watch))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit status."""
    import fire
    import fire.core

    fire.core._DisplayError = fire_error  # one line instead of a usage dump
    known = commands(Commands)
    try:
        # undecodable bytes of an argument (lone surrogates) become U+FFFD: nothing later fails to print them
        call = parse(known, replace_surrogates(sys.argv[1:] if argv is None else argv))
        if isinstance(call, Help):
            summary = (Commands.__doc__ or "").strip()
            print(overview(summary, known) if call.command is None else command_help(known[call.command]))
            return 0
        fire.Fire(Commands(), command=[call.command, *call.argv], name="fastrag")
    except fire.core.FireExit as exc:
        return int(exc.code or 0)
    except NoMatch as exc:
        status(f"fastrag: {exc}")
        return exc.exit_code
    except UserError as exc:
        status(f"fastrag: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        status("fastrag: interrupted")
        return 130
    return 0
