"""Path and question-form evidence of the precision stage, and the spreading of a file's further spans."""

from __future__ import annotations

import pytest

from fastrag import _core
from fastrag.retrieval.evidence import PathWords, is_full_question, is_symbol_query, path_kind, symbol_name
from fastrag.retrieval.retriever import spread_files


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


def test_symbol_queries_and_full_questions() -> None:
    for text in ("HTTPAdapter", "model_post_init", "Sinatra::Base", "absl::StrSplit", "_private", "Depends"):
        assert is_symbol_query(text), text
    for text in ("middleware", "background tasks", "how are routes registered", "Depends on what?"):
        assert not is_symbol_query(text), text
    assert (
        symbol_name("Sinatra::Base") == "Base" and symbol_name("a.b.c") == "c" and symbol_name("Depends") == "Depends"
    )
    assert is_full_question("How do I load a LoRA adapter at runtime?")
    assert not is_full_question("how are routes registered") and not is_full_question("why?")


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


def test_spread_files_demotes_a_files_further_spans() -> None:
    file_of = [0, 0, 0, 1, 2]
    ranked = [(0, 1.0), (1, 0.9), (2, 0.8), (3, 0.6), (4, 0.3)]
    assert [c for c, _ in spread_files(ranked, file_of, 1.0)] == [0, 1, 2, 3, 4]
    spread = spread_files(ranked, file_of, 0.5)
    assert [c for c, _ in spread] == [0, 3, 1, 4, 2]
    assert dict(spread)[2] == pytest.approx(0.8 * 0.25)
    # a negative score (a test file's, after the precision stage) is pushed further down, never up
    negative = spread_files([(0, 1.0), (1, -0.2), (2, -0.4)], [0, 1, 1], 0.5)
    assert [c for c, _ in negative] == [0, 1, 2] and dict(negative)[2] == pytest.approx(-0.6)
