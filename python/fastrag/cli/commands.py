"""The commands of ``python -m fastrag`` (Python Fire) and :func:`main`.

Parse and check arguments, call the library, print. A :class:`~fastrag.errors.UserError`
becomes one line on stderr and a non-zero exit status; nothing else is caught here.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from fastrag.arguments import MIN_CHUNK_SIZE, bool_arg, int_arg, mode_arg, path_arg, text_arg
from fastrag.cli.flags import fire_error, globs, host_names, join_repeated, raw_text, repo_names, status, target_size
from fastrag.cli.shards import index_shards
from fastrag.config import (
    DEFAULT_ANSWERS_DIR,
    DEFAULT_INDEX_DIR,
    DEFAULT_K,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MODE,
    DEFAULT_REPO_PATH,
    DEFAULT_SEARCH_RESULTS_DIR,
    MAX_CHUNK_SIZE,
    MAX_K,
    MAX_NEW_TOKENS,
)
from fastrag.errors import UsageError, UserError


class Commands:
    """fastrag: retrieval-augmented generation for codebases."""

    def index(
        self,
        max_chunk_size: Any = MAX_CHUNK_SIZE,
        repo_path: Any = str(DEFAULT_REPO_PATH),
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        vectors: Any = None,
        repos: Any = None,
        ray: Any = None,
        no_ignore: bool = False,
    ) -> None:
        """Chunk and index a repository (incremental: unchanged files are reused).

        Args:
            max_chunk_size: largest chunk in characters (50..2000).
            repo_path: the repository to index.
            index_dir: where the index is written.
            vectors: which chunks get embedding vectors: docs (Markdown/reST, the default), none, or another mode.
            repos: a file listing repositories (`path` or `name=path` per line): one shard each.
            ray: with --repos, build the shards as Ray tasks: local, auto or ray://host:port.
            no_ignore: also index what .gitignore, .git/info/exclude and .fastragignore files leave out.
        """
        from fastrag.indexing.builder import DEFAULT_EMBED, IndexParams, build_index

        size = int_arg("max_chunk_size", max_chunk_size, MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)
        embed = DEFAULT_EMBED if vectors is None else str(vectors)
        params = IndexParams(max_chunk_size=size, target_size=target_size(size), embed=embed)
        ignore = not bool_arg("no_ignore", no_ignore)
        if repos is not None:
            if not ignore:
                raise UsageError("--no_ignore is for one repository (--repo_path): shards honour their ignore files")
            index_shards(path_arg("repos", repos), path_arg("index_dir", index_dir), params, ray)
            return
        if ray is not None:
            raise UsageError("--ray needs --repos")
        from fastrag.indexing.catalog import CATALOG_FILE

        target = path_arg("index_dir", index_dir)
        if (target / CATALOG_FILE).exists():
            raise UsageError(f"{target} holds shards: index them with --repos, or give another --index_dir")
        report = build_index(path_arg("repo_path", repo_path), target, params, ignore=ignore)
        if report.up_to_date:
            print(f"index up to date: {report.files} files, {report.chunks} chunks ({report.seconds:.2f} s)")
        else:
            print(
                f"indexed {report.files} files into {report.chunks} chunks in {report.seconds:.2f} s "
                f"({report.chunked} chunked, {report.reused} reused, {report.removed} removed) -> {report.path}"
            )
            if report.vectors:
                print(f"vectors: {report.vectors} chunks, {report.embedded} embedded in {report.embed_seconds:.2f} s")
        if report.skipped:
            from fastrag.indexing.corpus import skipped_summary

            status(skipped_summary(report.skipped))

    @raw_text("query", "path", "lang", "repo")
    def search(
        self,
        query: Any,
        k: Any = DEFAULT_K,
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        mode: Any = DEFAULT_MODE,
        path: Any = None,
        lang: Any = None,
        repo: Any = None,
    ) -> None:
        """Print the k spans that best answer QUERY, each with its line that best matches QUERY.

        Args:
            query: the question.
            k: how many spans (1..10).
            index_dir: where the index lives.
            mode: lexical, vector or hybrid (hybrid is lexical on an index without vectors).
            path: only files matching this glob (repeatable: any may match), e.g. 'docs/**' or '*.rs'.
            lang: only files of this language (python, markdown, cpp, rust, ... or a suffix such as py).
            repo: of an index built with --repos, search only this shard (repeatable).
        """
        from fastrag.retrieval.filters import SearchFilter
        from fastrag.retrieval.retriever import Retriever

        text = text_arg("the query", query)
        n = int_arg("k", k, 1, MAX_K)
        chosen = SearchFilter.parse(globs(path), lang)
        where = path_arg("index_dir", index_dir)
        retriever = Retriever.open(where, repos=repo_names(repo, where))
        hits = retriever.search(text, n, mode_arg(mode), allowed=chosen.mask(retriever.index))
        if not hits:
            status("no match")
            return
        from fastrag.indexing.corpus import read_text
        from fastrag.indexing.sources import Sources
        from fastrag.retrieval.snippets import best_line

        locate = Sources.of(retriever.index.manifest).locate  # any working directory
        texts: dict[str, str] = {}
        for rank, hit in enumerate(hits, 1):
            print(f"{rank:2d}. {hit.file_path}:{hit.start}-{hit.end}  score {hit.score:.2f}")
            try:
                source = texts.setdefault(hit.file_path, read_text(locate(hit.file_path)))
            except OSError:  # the file changed since indexing: the location alone
                continue
            line = best_line(source, hit.start, hit.end, text)
            if line:
                print(f"      {line}")

    @raw_text("path", "lang", "repo")
    def search_dataset(
        self,
        dataset_path: Any = None,
        k: Any = DEFAULT_K,
        save_directory: Any = str(DEFAULT_SEARCH_RESULTS_DIR),
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        mode: Any = DEFAULT_MODE,
        path: Any = None,
        lang: Any = None,
        repo: Any = None,
    ) -> None:
        """Retrieve the k best spans for every question of a dataset and save them as JSON.

        Args:
            dataset_path: a dataset JSON file (AnsweredQuestions or UnansweredQuestions).
            k: spans per question (1..10).
            save_directory: folder of the output file (named after the dataset).
            index_dir: where the index lives.
            mode: lexical, vector or hybrid.
            path: only files matching this glob (repeatable: any may match).
            lang: only files of this language (or a suffix such as py).
            repo: of an index built with --repos, search only this shard (repeatable).
        """
        from fastrag.evaluation.search_dataset import search_dataset
        from fastrag.retrieval.filters import SearchFilter

        if dataset_path is None:
            raise UsageError("--dataset_path is required")
        started = time.perf_counter()
        target, n = search_dataset(
            path_arg("dataset_path", dataset_path),
            int_arg("k", k, 1, MAX_K),
            path_arg("save_directory", save_directory),
            path_arg("index_dir", index_dir),
            progress=True,
            mode=mode_arg(mode),
            search_filter=SearchFilter.parse(globs(path), lang),
            repos=repo_names(repo, path_arg("index_dir", index_dir)),
        )
        print(f"saved {n} results to {target} ({time.perf_counter() - started:.2f} s)")

    def evaluate(
        self,
        student_search_results_path: Any = None,
        dataset_path: Any = None,
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

        if student_search_results_path is None or dataset_path is None:
            raise UsageError("--student_search_results_path and --dataset_path are required")
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
        if show_missed:
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

    @raw_text("question")
    def answer(
        self,
        question: Any,
        k: Any = DEFAULT_K,
        model: Any = None,
        max_new_tokens: Any = None,
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        save_directory: Any = str(DEFAULT_ANSWERS_DIR),
    ) -> None:
        """Answer QUESTION from the k best spans, citing them; save it to SAVE_DIRECTORY/answer.json.

        On a terminal the answer streams token by token; the cited sources are listed after it.

        Args:
            question: the question.
            k: spans to retrieve (0..10; 0 answers with a fixed message without loading a model).
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported or exportable, else the packaged SmolLM2, saying so on stderr).
            max_new_tokens: bound on the answer's length in tokens (1..1024, default 80).
            index_dir: where the index lives.
            save_directory: folder of answer.json.
        """
        from fastrag.answering.answer import answer

        text = text_arg("the question", question)
        n = int_arg("k", k, 0, MAX_K)
        limit = int_arg(
            "max_new_tokens", DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens, 1, MAX_NEW_TOKENS
        )
        name = None if model is None else text_arg("--model", model)
        live = sys.stdout.isatty()

        def show(piece: str) -> None:
            sys.stdout.write(piece)
            sys.stdout.flush()

        result = answer(
            text, n, name, path_arg("index_dir", index_dir), path_arg("save_directory", save_directory), limit,
            show if live else None, on_note=lambda note: status(f"fastrag: {note}"),
        )  # fmt: skip
        if live and result.load is not None:
            print()
        else:
            print(result.body)
        if result.sources:
            print("\nSources:")
            for excerpt in result.cited:
                print(f"  {excerpt.citation}")
        if result.load is not None:
            how = {"hit": " (compiled cache)", "saved": " (compiled cache saved)"}.get(result.load.compiled, "")
            tokens = result.prompt_tokens
            status(f"{result.load.name}: loaded in {result.load.seconds:.1f} s{how}, prompt {tokens} tokens")
        status(f"saved to {result.saved_to} ({result.seconds:.1f} s)")

    def answer_dataset(
        self,
        student_search_results_path: Any = None,
        save_directory: Any = str(DEFAULT_ANSWERS_DIR),
        model: Any = None,
        max_new_tokens: Any = None,
        batch_size: Any = None,
    ) -> None:
        """Answer every question of a search-results file with its retrieved sources; save them as JSON.

        The output keeps the input's file name; an interrupted run resumes where it stopped.

        Args:
            student_search_results_path: output of search_dataset.
            save_directory: folder of the output file.
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported or exportable, else the packaged SmolLM2, saying so on stderr).
            max_new_tokens: bound on each answer's length in tokens (1..1024, default 80).
            batch_size: prompts generated together (1..256, default 64).
        """
        from fastrag.answering.answer import DEFAULT_BATCH_SIZE, answer_dataset

        if student_search_results_path is None:
            raise UsageError("--student_search_results_path is required")
        limit = int_arg(
            "max_new_tokens", DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens, 1, MAX_NEW_TOKENS
        )
        batch = int_arg("batch_size", DEFAULT_BATCH_SIZE if batch_size is None else batch_size, 1, 256)
        report = answer_dataset(
            path_arg("student_search_results_path", student_search_results_path),
            path_arg("save_directory", save_directory),
            None if model is None else text_arg("--model", model),
            limit,
            batch,
            on_note=lambda note: status(f"fastrag: {note}"),
        )
        resumed = f", {report.resumed} resumed" if report.resumed else ""
        print(
            f"saved {report.questions} answers to {report.target} ({report.generated} generated{resumed}, "
            f"{report.without_sources} without sources, {report.seconds:.1f} s)"
        )

    def evaluate_answers(self, answers_path: Any = None, dataset_path: Any = None) -> None:
        """Print how well the answers of an answer_dataset output recall the dataset's reference answers.

        Key-term recall, word recall, median answer length, degenerate answers and citation validity
        (defined in fastrag/evaluation/answer_metrics.py).

        Args:
            answers_path: output of answer_dataset.
            dataset_path: the AnsweredQuestions dataset (questions with reference answers).
        """
        from fastrag.evaluation.answer_metrics import score_answers, summarize
        from fastrag.evaluation.datasets import ground_truth, load_answers, load_dataset

        if answers_path is None or dataset_path is None:
            raise UsageError("--answers_path and --dataset_path are required")
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

    @raw_text("token", "allowed_host")
    def serve(
        self,
        host: Any = "127.0.0.1",
        port: Any = 5000,
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        model: Any = None,
        token: Any = None,
        allowed_host: Any = None,
    ) -> None:
        """Serve the HTTP API and the page (search, streamed answers, indexing) until Ctrl-C.

        One process keeps the index (reloaded when it changes on disk) and the model (loaded on the
        first question) in memory. Paths given to the API must lie in data/.

        Args:
            host: address to listen on (default 127.0.0.1: this machine only). Any other address
                requires a bearer token on every request but /healthz.
            port: TCP port (0..65535; 0 picks a free one).
            index_dir: where the index lives.
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported, else the packaged SmolLM2; /healthz names it).
            token: the bearer token (default: $FASTRAG_TOKEN, else one generated and printed on stderr
                when the host is not loopback); open the page as /?token=<token>.
            allowed_host: a Host name the server answers to (repeatable; default: the loopback names
                and the bound address).
        """
        address = text_arg("--host", host).strip()
        number = int_arg("port", port, 0, 65535)
        folder = path_arg("index_dir", index_dir)
        name = None if model is None else text_arg("--model", model)
        hosts = host_names(allowed_host)
        from fastrag.server import serve  # FastAPI is imported by this command only

        serve(address, number, folder, name, token=token, allowed_hosts=hosts)  # the token checked there

    @raw_text("token", "allowed_host")
    def mcp(
        self,
        transport: Any = "stdio",
        host: Any = "127.0.0.1",
        port: Any = 8765,
        index_dir: Any = str(DEFAULT_INDEX_DIR),
        model: Any = None,
        token: Any = None,
        allowed_host: Any = None,
    ) -> None:
        """Serve the index to coding agents as MCP tools: search, read_span, answer, index_status.

        The index is opened once and followed when it is rebuilt; the model loads on the first answer.
        See docs/mcp.md for an agent's configuration.

        Args:
            transport: stdio (default: the agent starts this process) or http (streamable HTTP on HOST:PORT/mcp).
            host: address to listen on with http (default 127.0.0.1: this machine only).
            port: TCP port with http (0..65535; 0 picks a free one).
            index_dir: where the index lives.
            model: OpenVINO IR folder, .gguf file, hub id or `smollm2` (default: $FASTRAG_MODEL, else Qwen/Qwen3-0.6B
                when exported, else the packaged SmolLM2; index_status names it).
            token: with http, the bearer token (as for serve: default $FASTRAG_TOKEN, else one generated and
                printed on stderr when the host is not loopback).
            allowed_host: with http, a Host name the server answers to (repeatable; as for serve).
        """
        chosen = text_arg("--transport", transport).strip()
        address = text_arg("--host", host).strip()
        number = int_arg("port", port, 0, 65535)
        folder = path_arg("index_dir", index_dir)
        name = None if model is None else text_arg("--model", model)
        hosts = host_names(allowed_host)
        from fastrag.server.mcp import run  # the MCP SDK is imported by this command only

        run(chosen, address, number, folder, name, token=token, allowed_hosts=hosts)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit status."""
    import fire
    import fire.core

    fire.core._DisplayError = fire_error  # one line instead of a usage dump
    try:
        fire.Fire(Commands(), command=join_repeated(sys.argv[1:] if argv is None else argv), name="fastrag")
    except fire.core.FireExit as exc:
        return int(exc.code or 0)
    except UserError as exc:
        status(f"fastrag: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        status("fastrag: interrupted")
        return 130
    return 0
