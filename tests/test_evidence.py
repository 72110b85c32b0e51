"""Path and question-form evidence of the precision stage, and the spreading of a file's further spans."""

from __future__ import annotations

import pytest

from fastrag import _core
from fastrag.retrieval.evidence import (
    PathWords,
    Prefixes,
    asked_symbol,
    asks_directly,
    asks_for_passage,
    asks_location,
    is_symbol_query,
    lead_phrase,
    names_identifier,
    names_version,
    older_versions,
    path_kind,
    query_traits,
    subject_text,
    symbol_name,
)
from fastrag.retrieval.retriever import ASKED_SPREAD, NAMED_SPREAD, SPREAD, demote_files, file_spread, spread_files


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_api.py",
        "pkg/foo_test.go",
        "src/test/java/org/FooTest.java",
        "lib/foo.spec.ts",
        "spec/models/user_spec.rb",
        "Tests/AlamofireTests/SessionTests.swift",
        "modules/core/src/test/scala/CatsSuite.scala",
        "packages/x/__tests__/a.js",
        "conftest.py",
    ],
)
def test_tests_are_recognised_in_every_convention(path: str) -> None:
    assert path_kind(path).test


def test_a_test_folder_is_told_from_a_test_name_alone() -> None:
    assert path_kind("tests/test_api.py").test_folder and path_kind("spec/models/user_spec.rb").test_folder
    assert not path_kind("pkg/foo_test.go").test_folder and path_kind("pkg/foo_test.go").test
    assert not path_kind("lib/test_functions.bash").test_folder and path_kind("lib/test_functions.bash").test
    assert not path_kind("src/runner.py").test_folder


@pytest.mark.parametrize(
    "path", ["src/requests/auth.py", "lib/contest.rb", "latest.go", "src/Request.java", "testing_notes.md"]
)
def test_implementation_files_are_not_tests(path: str) -> None:
    assert not path_kind(path).test


def test_examples_and_prose() -> None:
    assert path_kind("examples/offline_inference/basic.py").example
    assert path_kind("docs_src/tutorial/app.py").example
    assert not path_kind("src/example_utils.py").example
    assert path_kind("docs/features/lora.md").prose and path_kind("README.rst").prose
    assert not path_kind("vllm/lora/request.py").prose


def test_symbol_queries() -> None:
    for text in (
        "HTTPAdapter",
        "httpadapter",
        "model_post_init",
        "Sinatra::Base",
        "absl::StrSplit",
        "_private",
        "Depends",
    ):
        assert is_symbol_query(text), text
    assert is_symbol_query("middleware"), "a lookup in any case; only the index's definitions of the name answer it"
    for text in ("background tasks", "how are routes registered", "Depends on what?", "a.", "::", "1st"):
        assert not is_symbol_query(text), text
    assert (
        symbol_name("Sinatra::Base") == "Base" and symbol_name("a.b.c") == "c" and symbol_name("Depends") == "Depends"
    )


def test_a_question_about_one_name_asks_for_that_name() -> None:
    for text, name in (
        ("HTTPAdapter", "HTTPAdapter"),
        ("How does ZodType work", "ZodType"),
        ("What is Sinatra::Base", "Sinatra::Base"),
        ("where is `HTTPAdapter` defined", "HTTPAdapter"),
        ("Which module contains model_post_init", "model_post_init"),
        ("How is app.render implemented", "app.render"),
        ("what does Depends() do", "Depends"),
        ("Where is the code for ZodType", "ZodType"),
        # the same asked without a question's form: an embedded question, a request's subject, keywords
        ("how ZodType works", "ZodType"),
        ("where HTTPAdapter is defined", "HTTPAdapter"),
        ("the Depends class", "Depends"),
        ("ZodType defined", "ZodType"),
        ("what is responsible for HTTPAdapter", "HTTPAdapter"),
        ("the ZodType type", "ZodType"),
        ("Serializer trait", "Serializer"),
        ("ConstraintMaker struct", "ConstraintMaker"),
        # a plain word in lower case is a name when the question asks for its definition
        ("where is session defined", "session"),
        ("apirouter definition", "apirouter"),
        # words for what is wanted of the name, auxiliaries and pronouns, contractions, a dash between parts
        ("why does ZodType exist", "ZodType"),
        ("where does HTTPAdapter happen", "HTTPAdapter"),
        ("Serializer internals", "Serializer"),
        ("Depends usage", "Depends"),
        ("show APIRouter", "APIRouter"),
        ("Could you explain ZodError?", "ZodError"),
        ("what's Sinatra::Base", "Sinatra::Base"),
        ("where’s HTTPAdapter", "HTTPAdapter"),
        ("ZodType - how does it work?", "ZodType"),
        ("ZodType — where is it?", "ZodType"),
        ("where can I find ZodType", "ZodType"),
        ("Where do I look for HTTPAdapter?", "HTTPAdapter"),
        ("why is Depends needed", "Depends"),
        ("who calls ZodType", "ZodType"),
        ("purpose of HTTPAdapter", "HTTPAdapter"),
        ("ZodType behaviour", "ZodType"),
        # the words that frame a question: what the one asking means to do, the code base and its places
        ("Which part of the codebase handles ZodType?", "ZodType"),
        ("What component is responsible for HTTPAdapter", "HTTPAdapter"),
        ("Where in the repo is Depends", "Depends"),
        ("which files are involved in ZodType", "ZodType"),
        ("how do I change ZodType", "ZodType"),
        ("To fix a bug in ZodType, which file do I open?", "ZodType"),
        ("how would I go about changing HTTPAdapter", "HTTPAdapter"),
        ("how is ZodType done here", "ZodType"),
        ("is HTTPAdapter implemented anywhere?", "HTTPAdapter"),
        ("where can ZodType be found", "ZodType"),
        ("which module has the main logic for ZodType?", "ZodType"),
        ("the core implementation of HTTPAdapter", "HTTPAdapter"),
        ("can't find ZodType anywhere, where is it", "ZodType"),
    ):
        assert asked_symbol(text) == name, text
    for text in (
        "how are routes registered",
        "What is the default value of max_num_seqs",
        "ZodType structure",
        "",
        "ZodType & friends",
        "why does ZodType exist twice",
        "what's ZodType's parse",
    ):
        assert asked_symbol(text) is None, text
    # a plain word beside a question's own words is a concept; alone, it is a lookup
    assert asked_symbol("How does code generation work") is None and asked_symbol("code generation") is None
    assert asked_symbol("how does zodtype work") is None and asked_symbol("how zodtype works") is None
    assert asked_symbol("how does zodtype work", lambda word: word == "zodtype") == "zodtype"
    assert asked_symbol("middleware") == "middleware" and asked_symbol("ZodType parse errors") is None


@pytest.mark.parametrize(
    "text",
    [
        "How do I load a LoRA adapter at runtime",
        "what is the default value of max_model_len",
        "Which page explains prefix caching",
        "does the scheduler preempt requests",
        "In the Gaudi log, how much memory did warm-up take",
        "where in the guide are contributor questions answered",
        "can you show the retry settings",
    ],
)
def test_direct_questions_are_told_by_their_words(text: str) -> None:
    for form in (text, text + "?", text + ".", text + " !"):
        assert asks_directly(form), form
        assert query_traits(form)[0] == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "how requests are retried through the adapter",
        "middleware stack and CORS",
        "HTTPAdapter",
        "async file I/O operations",
        "why?",
    ],
)
def test_descriptions_of_code_are_not_direct_questions(text: str) -> None:
    assert not asks_directly(text) and not asks_directly(text + "?"), text


def test_traits_name_tests_and_documentation() -> None:
    assert query_traits("fixtures for the retry tests") == (0.0, 1.0, 0.0)
    assert query_traits("which docs page covers LoRA") == (1.0, 0.0, 1.0)
    assert query_traits("retry policy") == (0.0, 0.0, 0.0)
    # tests or documentation said not to be wanted are not what the query names
    assert query_traits("need the source for the retry policy, not the tests") == (0.0, 0.0, 0.0)
    assert query_traits("retry policy without the tests (no docs)") == (0.0, 0.0, 0.0)
    # a list after "not" goes on past its commas, to the end of its sentence
    for listed in (
        "retry policy (skip vendored code, generated files and fixtures)",
        "retry policy, excluding docs, tests",
    ):
        assert query_traits(listed) == (0.0, 0.0, 0.0), listed
        assert not {"fixtures", "tests", "docs"} & set(subject_text(listed).split()), listed
    assert query_traits("I need the retry code. Tests and docs aren't useful") == (1.0, 0.0, 0.0)
    assert query_traits("skip the docs: where are the tests for retries") == (1.0, 1.0, 0.0)
    assert query_traits("the test for retries doesn't pass") == (0.0, 1.0, 0.0)


def _tokenize(text: str) -> list[str]:
    return _core.tokenize(text)


def test_path_words_match_stems_and_prefixes() -> None:
    words = PathWords(_tokenize)
    asked = words.words("cookie storage and persistence")
    assert words.share(asked, "src/requests/cookies.py") == pytest.approx(1 / 3)
    assert words.share(asked, "src/requests/sessions.py") == 0.0
    auth = words.words("authentication mechanisms")
    assert words.share(auth, "src/requests/auth.py") == pytest.approx(1 / 2)  # "auth" is a prefix of it
    folder = words.words("OpenAPI schema generation")
    assert words.share(folder, "fastapi/openapi/utils.py") > 0  # the folder's name counts
    assert words.share(words.words("how is it done"), "a/how.py") == 0.0  # stopwords only: nothing to match


def test_a_word_meets_a_part_of_a_name_in_another_form() -> None:
    for word, part in (("cookie", "cookies"), ("rout", "router"), ("router", "rout"), ("cert", "certif")):
        assert Prefixes({part}).meets(word), (word, part)
    for word, part in (("log", "logger"), ("route", "rout2"), ("args", "argument")):
        assert not Prefixes({part}).meets(word), (word, part)  # too short a prefix, or no prefix
    assert not Prefixes(()).meets("router")


@pytest.mark.parametrize(
    ("text", "lead"),
    [
        ("queue connection resolution and connectors", ["queue", "connection", "resolution"]),
        ("Mutex and Semaphore for coroutine synchronization", ["Mutex"]),
        ("Where is the code for request logging middleware?", ["request", "logging", "middleware"]),
        ("How does dependency injection work?", ["dependency", "injection"]),
        ("how the async HTTP client session works", ["async", "HTTP", "client", "session"]),
        ("what's the default `max_num_seqs` of the scheduler", ["default", "max_num_seqs"]),
        ("ZodType", ["ZodType"]),
        ("Which part of the codebase handles request logging middleware?", ["request", "logging", "middleware"]),
        ("What component is responsible for queue connection resolution", ["queue", "connection", "resolution"]),
        ("how can I change the background color of images", ["background", "color"]),
        ("Which source file contains the core implementation of request logging?", ["request", "logging"]),
        ("grep for request logging and show me the relevant definitions", ["request", "logging"]),
        # a frame word where the query's subject starts is part of it
        ("how change detection works", ["change", "detection"]),
        ("help text generation and usage", ["help", "text", "generation"]),
        ("How does update and delete statement building work", ["update"]),
        ("how Component lifecycle hooks run", ["Component", "lifecycle", "hooks", "run"]),
        # frame words alone are what the query says
        ("here", ["here"]),
        ("I want to modify", ["want"]),
        ("where is it", []),
        ("", []),
    ],
)
def test_the_first_phrase_a_query_is_about(text: str, lead: list[str]) -> None:
    assert lead_phrase(text) == lead


def test_spread_files_demotes_a_files_further_spans() -> None:
    file_of = [0, 0, 0, 1, 2]
    code = [False, False, False]
    ranked = [(0, 1.0), (1, 0.9), (2, 0.8), (3, 0.6), (4, 0.3)]
    assert [c for c, _ in spread_files(ranked, file_of, 1.0, code)] == [0, 1, 2, 3, 4]
    spread = spread_files(ranked, file_of, 0.5, code)
    assert [c for c, _ in spread] == [0, 3, 1, 4, 2]
    assert dict(spread)[2] == pytest.approx(0.8 * 0.25)
    # a negative score (a test file's, after the precision stage) is pushed further down, never up
    negative = spread_files([(0, 1.0), (1, -0.2), (2, -0.4)], [0, 1, 1], 0.5, code)
    assert [c for c, _ in negative] == [0, 1, 2] and dict(negative)[2] == pytest.approx(-0.6)


def test_spread_files_leaves_a_pages_sections_in_place() -> None:
    """A page's further sections keep their scores (the one a few words want is often not its first); the code
    files beside it are still spread."""
    file_of = [0, 0, 0, 1, 1, 2]
    ranked = [(0, 1.0), (1, 0.9), (2, 0.8), (3, 0.7), (4, 0.65), (5, 0.4)]
    spread = spread_files(ranked, file_of, 0.5, [True, False, False])
    assert [c for c, _ in spread] == [0, 1, 2, 3, 5, 4]
    assert dict(spread)[2] == 0.8 and dict(spread)[4] == pytest.approx(0.65 * 0.5)
    # without pages, every file is spread (as the ranker's weights were climbed)
    assert spread_files(ranked, file_of, 0.5, None) == spread_files(ranked, file_of, 0.5, [False, False, False])


def test_older_versions_are_those_kept_beside_a_newer_one() -> None:
    """A version folder beside a newer one of the same parent is an older copy; one alone says nothing of
    which copy is current (``pydantic/v1/`` is the old API, ``vllm/v1/`` the new engine)."""
    paths = [
        "packages/zod/src/v3/types.ts",  # 0: beside v4
        "packages/zod/src/v4/core/schemas.ts",  # 1
        "packages/zod/src/v4/classic/schemas.ts",  # 2
        "pydantic/v1/main.py",  # 3: alone
        "pydantic/main.py",  # 4
        "vllm/v1/engine/core.py",  # 5: alone
        "api/v2/routes.go",  # 6: beside v10
        "api/v10/routes.go",  # 7
        "api/v10/v1/old.go",  # 8: nested, beside v10/v2
        "api/v10/v2/new.go",  # 9
        "docs/v3.md",  # 10: a file, not a folder
        "lib/xv3/a.py",  # 11: not a version folder
        "lib/v4/a.py",  # 12: another parent's v4
    ]
    assert older_versions(paths) == {0: 3, 6: 2, 8: 1}
    assert older_versions([]) == {}


@pytest.mark.parametrize(
    ("text", "number", "named"),
    [
        ("v3 compatibility error types", 3, True),
        ("How did ZodError look in V3?", 3, True),
        ("the version 3 parser", 3, True),
        ("the version3 parser", 3, True),
        ("v3 compatibility error types", 4, False),
        ("v30 schemas", 3, False),
        ("sha3 digest", 3, False),
        ("how ZodType parses input", 3, False),
    ],
)
def test_names_version(text: str, number: int, named: bool) -> None:
    assert names_version(text, number) is named


def test_demote_files_lowers_the_files_given_and_keeps_the_others_order() -> None:
    file_of = [0, 1, 2, 1]
    ranked = [(0, 1.0), (1, 0.9), (2, 0.5), (3, -0.2)]
    demoted = demote_files(ranked, file_of, {1}, 0.3)
    assert [c for c, _ in demoted] == [0, 2, 1, 3]
    assert dict(demoted)[1] == pytest.approx(0.27) and dict(demoted)[3] == pytest.approx(-0.34)
    assert demote_files(ranked, file_of, set(), 0.3) == ranked


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("How does ClientSession acquire connections", True),
        ("what is the default value of max_num_seqs", True),
        ("how does app.render resolve views", True),
        ("Where is Sinatra::Base defined", True),
        ("how is withContext implemented", True),
        ("what does __init__ take", True),
        ("when is flush() called", True),
        ("How do I enable LoRA adapters in vLLM", False),
        ("what HTTP status does the MoE layer return", False),
        ("how does dependency injection work", False),
    ],
)
def test_a_name_in_code_is_told_by_its_shape(text: str, named: bool) -> None:
    assert names_identifier(text) is named, text


def test_questions_that_ask_where_something_is() -> None:
    for text in (
        "Where is the code for cookie storage",
        "Which file implements retries",
        "what module parses dates",
        "which code handles cookie storage",
        "what handles retries",
        "What is responsible for session expiry",
        "what logic decides the retry delay",
    ):
        assert asks_location(text) and asks_location(text + "?"), text
    for text in (
        "How does the scheduler preempt requests",
        "which option sets the timeout",
        "what is a monad",
        "what does the handler return",
        "which handles are kept open",
    ):
        assert not asks_location(text), text


def test_file_spread_follows_what_a_question_asks_for() -> None:
    code, docs = 0.0, 0.2  # no page among the first stage's best candidates; some

    def spread(query: str, lead: float, keywords: float = SPREAD) -> float:
        return file_spread(query, lead, names_identifier, keywords)

    # keywords and descriptions of code are spread, whatever their evidence
    assert spread("cookie storage", docs) == spread("cookie storage", code) == SPREAD
    assert spread("cookie storage", code, keywords=0.7) == 0.7
    # keywords that name a thing in code ask for the passage about it: spread less
    assert SPREAD < NAMED_SPREAD < 1.0
    assert spread("get_num_new_matched_tokens NIXLConnector return", code) == NAMED_SPREAD
    assert spread("ClientSession", docs) == NAMED_SPREAD
    assert file_spread("pp_locks default", code, names_identifier, SPREAD, 0.6) == 0.6
    assert file_spread("clientsession pool size", code, lambda q: "clientsession" in q) == NAMED_SPREAD
    # a question that asks where, or about a concept only code holds, is spread gently
    assert spread("Where can I find the retry settings?", docs) == ASKED_SPREAD
    assert spread("How does dependency injection work?", code) == ASKED_SPREAD
    # a question whose evidence includes pages, or that names a thing in code, wants its passage
    assert spread("How does dependency injection work?", docs) == 1.0
    assert spread("How does ClientSession acquire connections?", code) == 1.0
    assert spread("Where does ClientSession acquire connections?", code) == 1.0
    assert file_spread("where does clientsession pool connections", code, lambda q: "clientsession" in q) == 1.0
    # a question that asks where one name is wants the file that defines it, as the name alone does
    assert spread("Where is ClientSession defined?", docs) == spread("which module contains `ClientSession`", docs)
    assert spread("Where is ClientSession defined?", docs) == ASKED_SPREAD
    assert not asks_for_passage("Where is ClientSession defined?", docs)
    assert asks_for_passage("What is ClientSession?", docs) and asks_for_passage("What is ClientSession?", code)
    # its punctuation changes nothing
    for text in ("How does dependency injection work", "How does dependency injection work."):
        assert spread(text, code) == ASKED_SPREAD


def test_what_a_person_says_of_the_code_they_want_frames_it() -> None:
    assert subject_text("need the real implementation of retries") == "need the implementation of retries"
    assert subject_text("show me the actual code for retries") == "show me the code for retries"
    assert lead_phrase("production source of retry policy") == ["retry", "policy"]
    # before another word it says what the thing is: "actual parameters", "production config"
    assert subject_text("actual parameters of the call") == "actual parameters of the call"
    assert subject_text("production config loading") == "production config loading"


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Which part of the codebase handles retries?", "Which of the handles retries?"),
        ("To fix a bug in `retry()`, which file do I open", "To a in `retry()`, which file do I"),
        # the verb of "how ... work" frames the question wherever its "how" stands; "work" as a thing is kept
        ("how change detection works", "how change detection"),
        ("How does bean serialization work?", "How does bean serialization"),
        ("How do Serialize and Serializer work together", "How do Serialize and Serializer"),
        ("explain how retries work", "explain how retries"),
        ("how work stealing works in tokio", "how work stealing works in tokio"),
        ("how work stealing works", "how work stealing"),
        ("where is work scheduled", "where is work scheduled"),
        ("make retries work", "make retries work"),
        # the kind of code a question word asks for, and how it holds the thing: "file.rs" is not asked about
        ("Which file implements Runtime?", "Which Runtime?"),
        ("what class handles retries", "what retries"),
        ("Which modules contain the retry policy", "Which the retry policy"),
        ("class hierarchy for errors", "class hierarchy for errors"),
        ("which handler retries", "which handler retries"),
        # the code itself, named before what it is of
        ("Where is the code for bean serialization?", "Where is the for bean serialization?"),
        ("show me the implementation of retries", "show me the of retries"),
        ("the code generator for schemas", "the code generator for schemas"),
        # frame words alone are the query
        ("How does it work?", "How does it work?"),
        ("the project", "the project"),
        ("", ""),
    ],
)
def test_the_words_that_frame_a_question_are_not_its_subject(text: str, subject: str) -> None:
    assert subject_text(text) == subject


def test_tests_or_docs_a_query_does_not_want_are_not_searched() -> None:
    assert subject_text("the retry code, not the tests") == "the retry code, "
    assert subject_text("ZodType without the test files") == "ZodType "
    assert subject_text("ZodType (not the docs)") == "ZodType ("
    assert subject_text("ZodType - ignore docs") == "ZodType - "
    assert subject_text("retry policy. Tests and docs aren't useful.") == "retry policy. "
    # and the name left alone is a lookup of that name again
    assert asked_symbol("Show me ZodType without the tests") == "ZodType"
    assert lead_phrase("ZodType parse errors, no tests") == ["ZodType", "parse", "errors"]
    # a mention that is not the whole of what is left out, or that is wanted, stays
    assert "manual" in subject_text("models loaded without manual implementation")
    assert subject_text("where are the tests for ZodType") == "where are the tests for ZodType"
    assert subject_text("no tests") == "no tests", "the mention alone is the query"


def test_what_a_query_leaves_out_is_read_in_the_many_ways_it_is_said() -> None:
    # a list that goes on past a comma, a clause that only says not, mentions of a kind of thing
    assert subject_text("retries, excluding docs, READMEs and examples") == "retries, "
    assert subject_text("retry policy. Exclude: tests, fixtures, mocks, docs.") == "retry policy. "
    assert subject_text("retries (skip the specs and test helpers)") == "retries ("
    assert subject_text("retry code. Test code and example code should be left out.") == "retry code. "
    assert subject_text("retry code apart from the test helpers and fixtures") == "retry code "
    assert subject_text("retry code, anything but test code") == "retry code, "
    assert subject_text("retry code. I don't need docs, examples, or benchmarks.") == "retry code. I "
    assert subject_text("non-test source for retries") == " source for retries"
    assert subject_text("retry code -test -mock") == "retry code  ", "a search engine's minus"
    assert subject_text("retry-test harness") == "retry-test harness"
    # "not", "no" and "without" about what the code does, or a mention with more to say, stay
    for kept in (
        "validating data without a model using TypeAdapter usage examples",
        "running non-async blocking code inside the runtime usage examples",
        "why does the client not retry when the tests time out",
        "don't show me tests for retries, i want the code itself",
    ):
        assert subject_text(kept) == kept
    # what is said not to be wanted is not a trait that lifts it
    assert query_traits("retry code. I don't need docs, examples, or benchmarks.")[2] == 0.0
    assert query_traits("retry code, anything but test code")[1] == 0.0


def test_tests_or_docs_that_are_the_askers_situation_are_not_what_is_asked() -> None:
    # the query asks for the code after naming tests or docs as where the asker stands
    situation = (
        "I'm writing tests for retries and need to see the actual implementation first.",
        "the docs for retries look stale. show me the source that actually does it",
        "I'm fixing a flaky test and it seems to involve retries. Where is that code?",
        "the tests for retries are failing; where is the code they exercise",
        "In the tests I keep seeing references to retries but I can't find the real implementation. where is it",
        "I'd like to write a test for retries, but first I need to find the code it exercises.",
        "To fix the failing test test_retry_backoff, locate the retry policy",
        "Failing test: test_retry_backoff (AssertionError: expected 3 attempts). Find the retry policy.",
        "Can someone point me to the retry policy? Trying to fix a flaky test on CI.",
        "Could someone point me to where retries are implemented? I'm writing up the design doc for the migration.",
    )
    for text in situation:
        assert query_traits(text)[1:] == (0.0, 0.0), text
        assert not {"tests", "test", "docs"} & set(subject_text(text).split()), text
    # a request for the tests or docs, a topic that holds the word, or no request for code: wanted as before
    assert query_traits("show me the existing tests for retries")[1] == 1.0
    assert query_traits("find the failing tests for retries")[1] == 1.0
    assert query_traits("Where is the retry policy, and which tests cover it?")[1] == 1.0
    assert query_traits("To fix the failing test, locate the tests that cover retries")[1] == 1.0
    assert query_traits("Which spec files exercise retries? I need to follow their style")[1] == 1.0
    assert query_traits("Where is the code for test reporter interface?")[1] == 1.0
    assert "test" in subject_text("i want to change how the test reporter behaves, where is that code").split()
    # tests, mocks or pages that are part of what the query is about, further into its sentence, stay
    for about in (
        "how mock handler for simulating HTTP responses in tests behaves, where is that code",
        "A customer reported odd behavior that traces back to how pandoc parses Markdown. Where is the source?",
    ):
        assert subject_text(about) == about
    assert query_traits("Which section of the contributing guide explains code reviews?")[2] == 1.0
    assert subject_text("the tests for retries are failing") == "the tests for retries are failing"
