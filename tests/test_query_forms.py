"""One ranking for every form of a query: the marks around it never change what it finds.

Every question of the vLLM sets at hand and every query of the benchmark repositories is searched as
written, without its ``?``, with one appended, with it replaced by ``.`` (and ``!``, ``,``), quoted and in
backticks: the first ten results must be the same spans in the same order. Asked for in a request ("can you
find …", "show me …", "I'm looking for …", "explain …", "help me understand …", "I want to modify …"), a query is
searched as the words it asks for.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from conftest import DATASETS, ROOT, SHARED, shared_path
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval.evidence import query_traits, subject_text
from fastrag.retrieval.query import context_request, request_subject, with_apostrophes
from fastrag.retrieval.retriever import Retriever, bare_query, clean_query

XREPO = SHARED / "xrepo"
if str(ROOT / "benches") not in sys.path:
    sys.path.append(str(ROOT / "benches"))  # the bench scripts import each other by module name
K = 10


def forms(query: str) -> list[str]:
    """``query`` as written, then without its ending mark, with ``?``, ``.``, `` !``, ``?`` after a blank,
    ``,`` and ``:``, quoted or in backticks as a name or a phrase is pasted, and as a line of a list."""
    bare = query.rstrip().rstrip("?.!").rstrip()
    return [
        query,
        bare,
        f"{bare}?",
        f"{bare}.",
        f"{bare} !",
        f"{bare} ?",
        f"{bare},",
        f"{bare}:",
        f'"{bare}"',
        f"`{bare}`?",
        f"- {bare}",
    ]


def assert_same_in_every_form(retriever: Retriever, queries: Sequence[str], mode: str = "lexical") -> None:
    """The first :data:`K` hits of each query are the same in every one of its :func:`forms`."""
    asked = [forms(q) for q in queries]
    per_form = [retriever.search_many([f[i] for f in asked], K, mode) for i in range(len(asked[0]))]
    for j, query in enumerate(queries):
        first = [(h.file_path, h.start, h.end) for h in per_form[0][j]]
        assert first, query
        for i, results in enumerate(per_form[1:], 1):
            assert [(h.file_path, h.start, h.end) for h in results[j]] == first, (query, asked[j][i])


def requests(query: str) -> list[str]:
    """``query`` asked for as a person asks a colleague or an assistant to find something."""
    bare = query.rstrip().rstrip("?.!").rstrip()
    return [
        f"Can you find {bare}?",
        f"could you please show me {bare}",
        f"I want to find {bare}",
        f"I'm looking for {bare}.",
        f"show me {bare}, please",
        f"Please find {bare}!",
        f"look up {bare}",
        f"Tell me about {bare}",
        f"{bare} in this repository",
        f"{bare} in the source code",
        f"show me the code for {bare}",
        f"Explain {bare}",
        f"I need to understand {bare}",
        f"Can you help me understand {bare}?",
        f"I want to know more about {bare}",
        f"details on {bare}",
        f"Is there code for {bare}?",
        f"does this repo have {bare}",
        f"Quick question: can you tell me about {bare}?",
        f"hey, {bare}",
        f"give me an overview of {bare}",
        f"code that handles {bare} pls",
        f"{bare} explained",
        f"what about {bare}?",
        f"Tell me more about {bare}",
        f"can u find {bare}",
        f"Is there anything about {bare} in here?",
        f"need help with {bare}",
        f"Looking into {bare}",
        f"I want to modify {bare}",
        f"we have to fix {bare}",
        f"I'm trying to understand {bare}",
        f"Can you help me with {bare}?",
        f"help me debug {bare}",
        f"Any pointers on {bare}?",
        f"Point me to the code that handles {bare}",
    ]


def test_a_request_is_searched_as_what_it_asks_for() -> None:
    assert request_subject("Can you find the HTTPAdapter") == "HTTPAdapter"
    assert request_subject("show me the retry logic, please") == "retry logic"
    assert request_subject("I'm looking for a queue manager") == "queue manager"
    assert request_subject("hey, could you help me locate cookie storage") == "cookie storage"
    assert request_subject("find me where retries are configured") == "where retries are configured"
    assert request_subject("I want to see how auth works") == "how auth works"
    assert request_subject("tell me about the session store in this repo, thanks!") == "session store"
    assert request_subject("I need to understand the session store") == "session store"
    assert request_subject("can you help me understand how auth works") == "how auth works"
    assert request_subject("we'd like to learn more about cookie storage") == "cookie storage"
    assert request_subject("more details on the session store") == request_subject("info about session store")
    assert request_subject("Is there a function to parse dates") == "parse dates"
    assert request_subject("does this repo have a rate limiter") == request_subject("do we have rate limiter")
    assert request_subject("Quick question: how do I enable LoRA?") == "how do I enable LoRA?"
    assert request_subject("Can you tell me how do I enable LoRA") == request_subject("Q: how do I enable LoRA")
    assert request_subject("Hi there, how do I enable LoRA") == request_subject("ok, how do I enable LoRA")
    assert request_subject("an overview of routing") == request_subject("the logic which implements routing, thx")
    assert request_subject("any idea where retries are configured") == "where retries are configured"
    assert request_subject("do you know where the router lives") == "where the router lives"
    assert request_subject("the implementation of retries") == request_subject("code for retries") == "retries"
    assert request_subject("I want to modify the retry policy") == request_subject("tips on retry policy")
    assert request_subject("we're trying to debug the session store") == "session store"
    assert request_subject("onboarding question: how do I enable LoRA") == "how do I enable LoRA"
    assert request_subject("Task: find the session store") == "session store"
    # a question's own words, a name and a subject that only starts with such a word stay as they are
    for kept in (
        "How do I load a LoRA adapter",
        "where can I find cookie storage",
        "list comprehension parsing",
        "get_user_id",
        "show_exceptions rendering",
        "find",
        "show me",
        "finder strategies for templates",
        "HTTPAdapter()",
        "layout of the project",
        "code generation for templates",
        "implementation details of the cache",
        "understanding retries",
        "knowledge base indexing",
        "Is there a way to disable retries",
        "Does vLLM support LoRA",
        "does the cache have a TTL",
        "Q-learning agent",
        "questions about routing",
        "OK status handling",
        "hello world example",
        "looking glass implementation",
    ):
        assert request_subject(kept) == kept
    assert clean_query("Can you find HTTPAdapter?") == clean_query("HTTPAdapter") == "HTTPAdapter"


def test_every_query_asked_for_in_a_request_is_searched_as_written() -> None:
    """Retrieval reads only :func:`clean_query` of a query, so equal cleaned texts rank alike."""
    sets = sorted((DATASETS / "UnansweredQuestions").glob("*.json"))
    queries = [q.question for path in sets for q in load_dataset(path).rag_questions]
    if (XREPO / "repos.json").is_file():
        xs = importlib.import_module("xrepo_score")
        queries += [t.query for t in xs.load_tasks(XREPO, xs.load_repos(XREPO))]
    assert len(queries) >= 200, "no question sets: run `make data`"
    for query in queries:
        assert context_request(query) is None, query  # no question of either set tells a story first
        for asked in requests(query):
            assert clean_query(asked) == clean_query(query), (query, asked)


def read(message: str) -> str:
    """What a message is read to ask (:func:`request_subject`), cleaned as :func:`clean_query` cleans it."""
    return bare_query(request_subject(with_apostrophes(bare_query(message))))


def test_a_context_about_the_one_asking_is_not_searched() -> None:
    # what is read as the request; retrieval searches it and then the whole message (the next test)
    # the request after the story is what is searched
    assert read("As an agent working on a bug fix, I need the concrete implementation of ZodError") == "ZodError"
    assert read("I'm debugging a production issue and need to find the TCP connector") == "the TCP connector"
    assert read("Task: fix flaky test. Step 2: locate the TCP connector") == "TCP connector"
    assert (
        read("Context: we are migrating to v2. Question: where is field_validator implemented?")
        == "where is field_validator implemented"
    )
    assert (
        read("I keep landing in the test suite, where is the actual code for how redirects are followed?")
        == "where is the actual code for how redirects are followed"
    )
    # a context opened by what the one asking is doing, and a need after ", so"
    assert read("Porting this module to async over the sprint, so I need the original code for the TCP connector.") == (
        "TCP connector"
    )
    assert read("Working on a refactor of the config layer. Which modules touch the cookie jar?") == (
        "Which modules touch the cookie jar"
    )
    for whole in (
        "According to the docs, where is the TCP connector configured?",
        "Using LoRA adapters, how do I merge?",
    ):
        assert read(whole) == whole.rstrip("?"), whole
    # a need said in the first person follows a context, whoever the context is about; one that points back does not
    assert read("Ugh, the docs are no help here. I just want to see the actual code for the TCP connector.") == (
        "TCP connector"
    )
    told = "A customer's bug report is all about the TCP connector"
    assert read(told + ". I need to read the code that does this first.") == told
    whole = "A customer's bug report is all about the TCP connector. I need the code that does this before I reply"
    assert read(whole + ".") == whole
    # a last sentence that only thanks or signs off is said to the one answering
    assert read("Hi! Could you find the retry policy? Thanks so much.") == "retry policy"
    assert read("where is the retry policy handled?\n\nThanks, Priya") == "where is the retry policy handled"
    assert read("I'm stuck. I want to see the TCP connector, nothing fancy. No rush at all!") == (
        "TCP connector, nothing fancy"
    )
    for kept in ("Thanks", "ThankYou", "thank you notes"):
        assert read(kept) == kept
    # a long run of sign-off words that does not end as one is read in linear time, not by trying every split
    started = time.perf_counter()
    clean_query("retries. " + "Thanks " * 40 + "?!x")
    assert time.perf_counter() - started < 0.5
    # a message of the longest a server takes, cut into a clause at every comma: read once, not once per clause
    started = time.perf_counter()
    clean_query(("a, " * 1400)[:4096])
    assert time.perf_counter() - started < 0.25
    # nor once per clause and reason: every sentence here is a context about the one asking
    started = time.perf_counter()
    clean_query(("I. " * 1400)[:4096])
    assert time.perf_counter() - started < 0.25
    # nor what it says of tests and pages once per mention: each mention reads the few words around it
    for mentions in ("test find ", "find test, ", "In the tests I find, ", "show me the code, failing test, "):
        message = clean_query((mentions * 1400)[:4096])
        started = time.perf_counter()
        query_traits(message)
        subject_text(message)
        assert time.perf_counter() - started < 0.25, mentions
    # a request first, its reason after: the request
    assert read("Where is the TCP connector? Asking because our CI broke overnight.") == "Where is the TCP connector"
    assert read("show me connection pooling - I'm fixing a crash in prod") == "connection pooling"
    assert read("Quick one: show me the code for ZodError. Need it before standup at 10.") == "ZodError"
    # a need that points back is a reason, not the request
    assert read("Quick one from the platform team: show me ZodError. Need it by 10") == "ZodError"
    # a request after a story about someone else: the request, when it names its topic
    assert read(
        "Saw a deprecation warning pointing at compat.py, but that file just forwards calls. Point me to where the real"
        " work for the TCP connector happens."
    ) == ("where the real work for the TCP connector happens")
    # a request that points back at the story ("behind that", "of it", "track it down") is not searched alone; of the
    # story, the last sentence that names its topic is
    assert read("I keep seeing references to retries in the logs. Show me the code behind that.") == (
        "I keep seeing references to retries in the logs"
    )
    assert read("Customer saw 502s after upgrading. Logs hint at the TCP connector. Find the code responsible.") == (
        "TCP connector"
    )
    told = "Apparently the retry policy was rewritten last year and nobody updated the wiki"
    assert read(told + ". Can you locate the current version of it?") == told
    # a request that names its topic is searched, whatever it ends with; one that names more than a word besides a
    # pronoun is no request that only points back
    message = "Context: migrating off the old HTTP layer. Find the TCP connector and everything that depends on it."
    assert "TCP connector" in read(message)
    warned = "I keep seeing deprecation warnings around the retry policy in our build output"
    assert read(warned + ". Where is that warning emitted?") == warned + ". Where is that warning emitted"
    assert read("My lead wants me to extend the TCP connector. No idea where that is, can you track it down?") == (
        "My lead wants me to extend the TCP connector. No idea where that is"
    )
    # a question after a story about someone else: the question
    assert read("Saw a weird warning in the logs this morning. How do I enable LoRA at runtime?") == (
        "How do I enable LoRA at runtime"
    )
    assert read("Quick question from the infra team: where is the retry policy?") == "where is the retry policy"
    # an agent's fields: the one that says what to find is searched, the ones that say how to answer are not
    for message in (
        'intent=locate_code query="TCP connector" scope=src exclude=tests,docs limit=10',
        'search_code(query="TCP connector", top_k=5, include_tests=false)',
        "- task: find definition\n- target: TCP connector\n- output: file path + one-line summary",
        "query: TCP connector | type: definition | lang: any | results: 5",
        "[agent] searching codebase :: target=TCP connector :: reason=user request",
        "Goal: locate the implementation of TCP connector. Constraints: only source files, max 5 results.",
        "GOAL: fix failing test | SUBTASK: locate TCP connector | OUTPUT: file paths + line ranges",
        "context from task: migrate callbacks to async/await\nsearch for: TCP connector",
        "Context: upgrading the dependency broke the build.\nFind: TCP connector",
        "- goal: add timeout support\n- look for: TCP connector\n- return: file paths only",
    ):
        assert read(message) == "TCP connector", message
    assert read("target: Sinatra::Base routing, scope: lib") == "Sinatra::Base routing"
    # such a field opens a line, a sentence or a part; inside a sentence its name is prose, what follows still asked
    assert read("Locate the TCP connector.\nOutput format: ranked file paths only.") == "TCP connector"
    objective = "Objective: extend the TCP connector"
    assert read(objective + ".\nOut of scope: UI changes.") == objective
    escalated = "Customer escalation, high priority: duplicate charges. Engineering suspects the TCP connector. Where?"
    assert read(escalated) == "TCP connector"
    assert "TCP connector" in read("Escalation, high priority: the TCP connector drops requests. Where is it handled?")
    assert "retry policy and log format: seen in the docs" in read(
        "retry policy and log format: seen in the docs, never explained. Where is the source?"
    )
    # a sentence that says how to answer is not searched, and "Do not …" asks nothing
    assert read("Locate the TCP connector. Return paths only.") == "TCP connector"
    assert read("Planner: find the retry policy. Do not modify files. Respond with paths and line ranges") == (
        "retry policy"
    )
    # verbs of fetching make a request before the code they fetch, and only then
    assert read("A colleague flagged a race; please pull up the logic responsible for the retry policy") == (
        "retry policy"
    )
    assert read("Investigating CI failure on main. Next action: retreive the code responsible for ZodType") == (
        "ZodType"
    )
    assert read("Fetch the relevant source for the TCP connector") == "TCP connector"
    assert read("fetch retries and timeouts") == "fetch retries and timeouts"
    # of a story's sentence, what follows the word that points at it ("mentions", "suspect", "it's related to"); not
    # after a participle, which may follow it
    assert read("Upgrading broke our build and the changelog mentions the retry policy. where is that handled?") == (
        "retry policy"
    )
    assert read("There is something called HandlerStack in here and I think it's what's breaking it. find it?") == (
        "HandlerStack"
    )
    seen = "I keep seeing ZodType mentioned in error messages but never in our own code"
    assert read(seen + ". Where does that live?") == seen
    # a further ask joined to the request ("and explain the control flow", "and are there any docs …") names no topic:
    # the request before it does, or the story if that only points back ("the relevant code")
    assert read(
        "Requests hang. I suspect the retry policy might be involved. Please find the relevant code and explain the"
        " control flow."
    ) == ("retry policy might be involved")
    assert "retry policy" in read(
        "Trying to understand the retry policy before I open a PR. What is the entry point, and are there any docs?"
    )
    # nor does its purpose, or a request for "the existing implementation"; of the story, a sentence that asks is not
    # what it told
    assert read(
        "The user wants a feature similar to the retry policy. Find the existing implementation to use as a template."
    ) == ("retry policy")
    assert read(
        "I read that the TCP connector was rewritten last release. is the old version still around? where's the new one"
    ) == ("I read that the TCP connector was rewritten last release")
    assert read("I suspect retries behave differently on Windows. Can you locate that part so I can confirm?") == (
        "retries behave differently on Windows"
    )
    # a step's number names nothing
    assert "retry policy" in read("Task: add logging around the retry policy. Step 1: locate the relevant code.")
    # a pronoun after what the request names is about that
    assert read("Customer says this regressed and I want to see the TCP connector as it exists now") == (
        "TCP connector as it exists now"
    )
    # a last request that only points back at what was told: what was told, without the request's own words
    for told, request, searched in (
        ("A coworker brought up ZodError at standup", "Can you find it?", None),
        ("The flaky test seems to involve the retry policy somehow", "Find it for me?", "retry policy somehow"),
        ("Profiling shows a lot of time spent in connection pooling", "Where is that code?", None),
        ("pretty sure we already have cookie parsing somewhere", "where is it", None),
        ("A user reported that the JSON encoder silently swallows errors", "Can you show me where that happens?", None),
    ):
        sep = ", " if request[0].islower() else ". "
        assert read(told + sep + request) == (searched or told), request
    # a name is a topic whatever it spells (HandlerStack is no word about handling), and one named in the request
    # keeps the request
    assert read("We're seeing 500s since the deploy. Need to look at HandlerStack.") == "to look at HandlerStack"
    assert read("I'm going in circles. where does Container get built") == "where does Container get built"
    assert read("It broke after the upgrade. Can you find it in Container?") == (
        "It broke after the upgrade. Can you find it in Container"
    )
    # searched whole: a need after a question, a context about the code
    for whole in (
        "How do I enable LoRA? I want to serve two adapters.",
        "In the pydantic v2 codebase, where is the validator defined?",
    ):
        assert read(whole) == whole.rstrip("?."), whole


def test_a_request_read_out_of_a_story_is_searched_before_the_whole_message() -> None:
    # the reading picked words that name nothing of the topic here; the message after it still holds the topic
    for message in (
        "nit: this duplicates logic that already exists in the TCP connector. Could you call into that instead?",
        "tbh no idea how the TCP connector works. can someone give me a pointer to the right file so I can read it",
    ):
        searched = clean_query(message)
        assert searched.startswith(read(message) + ". "), message
        assert searched.endswith(bare_query(message)) and "TCP connector" in searched, message
    # a request read whole, a field that says what to find, and a plain question: searched as read, nothing after
    for message, searched in (
        ("Can you find the HTTPAdapter?", "HTTPAdapter"),
        ('search_code(query="TCP connector", top_k=5)', "TCP connector"),
        ("where is the retry policy handled?\n\nThanks, Priya", "where is the retry policy handled"),
    ):
        assert clean_query(message) == read(message) == searched, message


def test_a_contraction_typed_without_its_apostrophe_is_read_with_it() -> None:
    assert with_apostrophes("whats the main file for retries") == "what's the main file for retries"
    assert (
        with_apostrophes("im lost, it doesnt work and I cant find it")
        == "i'm lost, it doesn't work and I can't find it"
    )
    assert with_apostrophes("Wheres ZodType") == "Where's ZodType"
    for kept in ("its parse method", "items", "thats_it", "whatsapp client", "component", "ids"):
        assert with_apostrophes(kept) == kept
    assert clean_query("wheres the code thats responsible for retries?") == clean_query(
        "where's the code that's responsible for retries"
    )


def test_clean_query_drops_only_the_marks_around_the_query() -> None:
    assert clean_query("How do I load a LoRA adapter?") == "How do I load a LoRA adapter"
    assert clean_query("retry policy. ") == clean_query("retry policy !") == "retry policy"
    assert clean_query("what does `a?.b` do?!") == "what does `a?.b` do"
    assert clean_query("?") == clean_query(" . ") == ""
    assert (
        clean_query('"retry policy"?')
        == clean_query("`retry policy`,")
        == clean_query("“retry policy”")
        == "retry policy"
    )
    assert clean_query("'a' or 'b'") == "'a' or 'b'", "only marks that enclose the whole query are dropped"
    # a label's colon, and a bullet or a quote's mark pasted with the line
    assert (
        clean_query("- HandlerStack:")
        == clean_query("* `HandlerStack`")
        == clean_query("> HandlerStack")
        == ("HandlerStack")
    )
    assert clean_query("-HandlerStack") == "-HandlerStack" and clean_query("--help me") == "--help me"
    assert clean_query("std::") == "std" and clean_query("a::b") == "a::b"


@pytest.fixture(scope="module")
def vllm(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    """The vLLM corpus indexed lexically (the default chunking and layers, no vectors)."""
    out = tmp_path_factory.mktemp("vllm-index")
    build_index(corpus, out, IndexParams(embed="none"), display_root="data/raw/vllm-0.10.1", progress=False)
    return Retriever.open(out)


def test_every_vllm_question_ranks_alike_in_every_form(vllm: Retriever) -> None:
    sets = sorted((DATASETS / "UnansweredQuestions").glob("*.json"))
    assert sets, "no question sets: run `make data`"
    questions = [q.question for path in sets for q in load_dataset(path).rag_questions]
    assert len(questions) >= 200
    assert_same_in_every_form(vllm, questions)


def test_every_benchmark_query_ranks_alike_in_every_form(tmp_path: Path) -> None:
    shared_path("xrepo/repos.json")  # skipped without ../shared, a failure in CI
    run = importlib.import_module("xrepo_run")
    xs = importlib.import_module("xrepo_score")
    repos = xs.load_repos(XREPO)
    trees = run.unpack_trees(repos, XREPO, tmp_path / "trees")
    tasks = xs.load_tasks(XREPO, repos)
    assert len(tasks) >= 800
    for repo in repos:
        out = tmp_path / "index" / repo.name
        build_index(trees[repo.name], out, IndexParams(embed="none"), progress=False)
        assert_same_in_every_form(Retriever.open(out), [t.query for t in tasks if t.repo == repo.name])


def test_a_name_typed_in_lowercase_or_capitals_ranks_as_typed_right(vllm: Retriever) -> None:
    """Each question's CamelCase names of code retyped in lowercase and in capitals: the same first hits as written."""
    sets = sorted((DATASETS / "UnansweredQuestions").glob("*.json"))
    questions = [q.question for path in sets for q in load_dataset(path).rag_questions]
    names = vllm.code_names

    def retyped(question: str, case: Callable[[str], str]) -> str:
        return " ".join(
            case(w) if names.spelled.get(w.casefold()) == w and "_" not in w and case(w) not in names.exact else w
            for w in question.split(" ")
        )

    for case in (str.lower, str.upper):
        pairs = [(q, typed) for q in questions if (typed := retyped(q, case)) != q]
        assert len(pairs) >= 30, len(pairs)
        assert [vllm.searched(t) for _, t in pairs] == [vllm.searched(q) for q, _ in pairs]
        assert vllm.search_many([t for _, t in pairs], K) == vllm.search_many([q for q, _ in pairs], K)


def swapped(question: str) -> str | None:
    """``question`` with the fourth and fifth letters of its first all-lowercase word of eight letters or more
    swapped (a slip of the fingers); ``None`` when it has no such word or the swap spells the same word."""
    for word in question.split():
        if len(word) >= 8 and word.isalpha() and word.islower() and word[3] != word[4]:
            return question.replace(word, word[:3] + word[4] + word[3] + word[5:], 1)
    return None


def test_a_mistyped_word_is_read_as_the_word_meant(vllm: Retriever) -> None:
    sets = sorted((DATASETS / "UnansweredQuestions").glob("*.json"))
    questions = [q.question for path in sets for q in load_dataset(path).rag_questions]
    # a question spelt right is searched as written, but for a word read as the name in code it spells in
    # another case ("entrypoint" as `EntryPoint`): none of these has a word the index lacks
    respelled = [
        (q, vllm.searched(q)) for q in questions if vllm.searched(q) != vllm.code_names.respelled(clean_query(q))
    ]
    assert not respelled
    slips = [(q, typo) for q in questions if (typo := swapped(q)) is not None]
    assert len(slips) >= 150
    restored = [(q, typo) for q, typo in slips if vllm.searched(typo) == vllm.searched(q)]
    # the misses: a misspelling the corpus itself holds ("dimnesion"), a word too rare to be the one meant
    assert len(restored) >= 0.95 * len(slips), sorted(set(slips) - set(restored))
    asked = restored[:50]
    assert vllm.search_many([typo for _, typo in asked], K) == vllm.search_many([q for q, _ in asked], K)
    vllm.respell = False
    try:
        assert vllm.respelled(asked[0][1]) == asked[0][1], "with respelling off, a query is searched as typed"
    finally:
        vllm.respell = True
