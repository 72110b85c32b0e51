"""Tests of :mod:`fastrag.indexing.chunking`: concrete examples, properties and the real corpus."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastrag._core
from fastrag.indexing.chunking import Chunk, chunk_file, chunk_markdown, chunk_plain, chunk_python
from fastrag.indexing.chunking.layers import markdown_layers, table_windows
from fastrag.indexing.chunking.markdown import markdown_sections

CORPUS = Path(__file__).resolve().parents[1] / "data" / "raw" / "vllm-0.10.1"
SIZES = (50, 300, 2000)
PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_chunks(text: str, chunks: list[Chunk], max_chunk_size: int, target_size: int | None = None) -> None:
    """Assert every invariant the chunkers promise."""
    target = max_chunk_size if target_size is None else target_size
    previous = 0
    gaps: list[str] = []
    for chunk in chunks:
        assert isinstance(chunk, Chunk)
        assert previous <= chunk.start < chunk.end <= len(text), (previous, chunk)
        assert chunk.end - chunk.start <= target <= max_chunk_size, chunk
        assert text[chunk.start : chunk.end].strip(), f"whitespace-only chunk {chunk}"
        assert isinstance(chunk.context, str)
        gaps.append(text[previous : chunk.start])
        previous = chunk.end
    gaps.append(text[previous:])
    uncovered = "".join(gaps).strip()
    assert not uncovered, f"uncovered non-whitespace: {uncovered[:80]!r}"
    fastrag._core.validate_spans(len(text), [(c.start, c.end) for c in chunks], max_chunk_size)


def spans(text: str, chunks: list[Chunk]) -> list[str]:
    """The text of every chunk."""
    return [text[c.start : c.end] for c in chunks]


def on_line_starts(text: str, chunks: list[Chunk]) -> bool:
    """Whether every chunk starts at a line start and ends at one or at the end."""
    starts = set(fastrag._core.line_starts(text))
    return all(c.start in starts and (c.end in starts or c.end == len(text)) for c in chunks)


# -- concrete examples: Python --------------------------------------------------------------

MODULE = '''"""Module docstring."""

import os
import sys

CONSTANT = 1


# A comment about the decorated function.
@decorator_one
@decorator_two(option=True)
def decorated(a, b):
    """Add."""
    return a + b


class Engine(Base, metaclass=Meta):
    """An engine with a long docstring that explains a lot of things in some detail."""

    limit = 10

    def start(self, x: int) -> str:
        """Start."""
        value = x * 2
        # the nested helper
        def helper(y: int) -> int:
            total = 0
            for i in range(y):
                total += i * value
            return total
        return str(helper(value))

    def stop(self) -> None:
        """Stop the engine and release every resource it holds, in order."""
        self.running = False
        self.resources.clear()
'''


def test_small_module_is_one_chunk() -> None:
    """A module that fits the target is a single chunk from its first character."""
    chunks = chunk_python(MODULE, 2000)
    assert [(c.start, c.end, c.context) for c in chunks] == [(0, len(MODULE), "")]


def test_decorators_and_comments_stay_with_the_def() -> None:
    """Leading comments and every decorator go with the function they precede."""
    chunks = chunk_python(MODULE, 2000, target_size=250)
    check_chunks(MODULE, chunks, 2000, 250)
    texts = spans(MODULE, chunks)
    holder = next(t for t in texts if "def decorated" in t)
    assert "# A comment about the decorated function." in holder
    assert "@decorator_one" in holder and "@decorator_two(option=True)" in holder
    assert "return a + b" in holder
    assert on_line_starts(MODULE, chunks)


def test_oversized_class_is_split_along_methods_with_signature_context() -> None:
    """A class above the target is split at its methods; chunks inside carry its header."""
    chunks = chunk_python(MODULE, 2000, target_size=400)
    check_chunks(MODULE, chunks, 2000, 400)
    texts = spans(MODULE, chunks)
    header = next(i for i, t in enumerate(texts) if "class Engine" in t)
    assert chunks[header].context == ""
    stop = next(i for i, t in enumerate(texts) if "def stop(self)" in t)
    assert stop != header
    assert texts[stop].lstrip().startswith("def stop(self) -> None:")
    assert chunks[stop].context == "class Engine(Base, metaclass=Meta):"
    assert on_line_starts(MODULE, chunks)


def test_nested_def_context_holds_every_enclosing_signature() -> None:
    """A chunk inside a method inside a class gets both signatures as context."""
    chunks = chunk_python(MODULE, 2000, target_size=120)
    check_chunks(MODULE, chunks, 2000, 120)
    inner = next(c for c in chunks if "total += i * value" in MODULE[c.start : c.end])
    assert inner.context == (
        "class Engine(Base, metaclass=Meta):\ndef start(self, x: int) -> str:\ndef helper(y: int) -> int:"
    )


def test_multiline_signature_is_collapsed_in_context() -> None:
    """A signature over several lines becomes one line of context."""
    source = "def f(\n    a: int,\n    b: int,\n) -> int:\n" + "".join(f"    v{i} = a + b + {i}\n" for i in range(20))
    chunks = chunk_python(source, 2000, target_size=150)
    check_chunks(source, chunks, 2000, 150)
    assert chunks[0].context == ""
    assert {c.context for c in chunks[1:]} == {"def f( a: int, b: int, ) -> int:"}


def test_oversized_simple_statement_is_split_on_lines() -> None:
    """A huge literal is split between its lines, never above the target."""
    source = "TABLE = {\n" + "".join(f"    'key{i}': {i},\n" for i in range(300)) + "}\n"
    chunks = chunk_python(source, 2000, target_size=500)
    check_chunks(source, chunks, 2000, 500)
    assert len(chunks) > 1
    assert on_line_starts(source, chunks)


def test_syntax_error_falls_back_to_plain_text() -> None:
    """Unparsable source is still chunked, by the plain chunker."""
    source = "def broken(:\n    pass\n" * 50
    chunks = chunk_python(source, 2000, target_size=300)
    check_chunks(source, chunks, 2000, 300)
    assert chunks == chunk_plain(source, 2000, 300)


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\x00\ny = 2\n",
        "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
        "x = " + "-" * 200_000 + "1\n",
        "x = f'{a!r:{b}}' if True else f'{\"nested\"}'\n",
        'print(f"{"\\n".join(parts)}")\n',
    ],
    ids=["nul", "nested-parens", "deep-unary", "fstring", "py312-fstring"],
)
def test_unparsable_or_pathological_source_never_raises(source: str) -> None:
    """NUL bytes, deep nesting and 3.12-only syntax fall back instead of raising."""
    for target in (50, 2000):
        check_chunks(source, chunk_python(source, 2000, target), 2000, target)


def test_crlf_offsets() -> None:
    """CRLF line breaks: spans are str offsets and boundaries fall after the CRLF."""
    source = "import os\r\n\r\ndef f():\r\n    return 1\r\n\r\n\r\ndef g():\r\n    return 2\r\n"
    chunks = chunk_python(source, 2000, target_size=30)
    check_chunks(source, chunks, 2000, 30)
    texts = spans(source, chunks)
    assert texts[-1] == "\r\n\r\ndef g():\r\n    return 2\r\n"
    assert "".join(texts) == source
    assert on_line_starts(source, chunks)


def test_lone_cr_offsets() -> None:
    """Lone CR line breaks count as lines, as for Python's tokenizer."""
    source = "x = 1\r\rdef f():\r    return 1\r\rdef g():\r    return 2\r"
    chunks = chunk_python(source, 2000, target_size=25)
    check_chunks(source, chunks, 2000, 25)
    texts = spans(source, chunks)
    assert any(t.lstrip().startswith("def g():") for t in texts)
    assert on_line_starts(source, chunks)


@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_non_ascii_same_line_statements(bom: str) -> None:
    """Byte columns of ``ast`` are converted to str offsets (BOM and astral characters)."""
    source = bom + 'def f():\n    a = "éééééééééé"; b = "😀😀😀😀😀😀😀😀"\n'
    chunks = chunk_python(source, 2000, target_size=30)
    check_chunks(source, chunks, 2000, 30)
    assert source.index("b = ") in {c.start for c in chunks}
    assert chunks[0].start == 0  # the BOM is covered


def test_bom_module() -> None:
    """A BOM does not prevent parsing; the first chunk covers it."""
    source = "\ufeff" + MODULE
    chunks = chunk_python(source, 2000, target_size=400)
    check_chunks(source, chunks, 2000, 400)
    assert chunks[0].start == 0
    assert any(c.context == "class Engine(Base, metaclass=Meta):" for c in chunks)


# -- concrete examples: Markdown and text ---------------------------------------------------

MARKDOWN = """# Installation

vLLM installs with pip on Linux.

## GPU

Pick your GPU vendor below. This introduction is long enough to be its own piece of text.

### CUDA

```bash
# not a heading: a shell comment inside a fence
pip install vllm
```

CUDA needs a recent driver; the wheel is built against CUDA 12.8 and runs on any newer one.

### ROCm

ROCm builds from source.

## CPU

CPU builds from source as well; AVX-512 makes it much faster on servers.
"""


def test_markdown_heading_path_in_context() -> None:
    """Chunks carry the heading path of the headings enclosing them but not inside them."""
    chunks = chunk_markdown(MARKDOWN, 2000, target_size=200)
    check_chunks(MARKDOWN, chunks, 2000, 200)
    by_start = {MARKDOWN[c.start : c.end].split("\n", 1)[0]: c.context for c in chunks}
    assert by_start["### CUDA"] == "Installation > GPU"
    assert by_start["## CPU"] == "Installation"
    assert by_start["# Installation"] == ""
    assert on_line_starts(MARKDOWN, chunks)


def test_markdown_hash_inside_fence_is_not_a_heading() -> None:
    """A ``#`` line inside a fenced block neither starts a chunk nor enters the path."""
    chunks = chunk_markdown(MARKDOWN, 2000, target_size=120)
    check_chunks(MARKDOWN, chunks, 2000, 120)
    assert all("shell comment" not in c.context for c in chunks)
    holder = next(c for c in chunks if "# not a heading" in MARKDOWN[c.start : c.end])
    assert "```bash" in MARKDOWN[holder.start : holder.end]  # the fence stayed whole
    continuation = next(c for c in chunks if MARKDOWN[c.start : c.end].startswith("CUDA needs"))
    assert continuation.context == "Installation > GPU > CUDA"


def test_small_sections_are_packed_together() -> None:
    """Tiny sibling sections share a chunk instead of becoming heading-only chunks."""
    text = "# Top\n\n" + "".join(f"## Part {i}\n\nShort text {i}.\n\n" for i in range(40))
    chunks = chunk_markdown(text, 2000, target_size=300)
    check_chunks(text, chunks, 2000, 300)
    assert len(chunks) < 10
    assert min(c.end - c.start for c in chunks) > 75


def test_sections_layer_keeps_each_section_alone() -> None:
    """``markdown_sections``: one chunk per heading section, never two sections packed together."""
    text = "# Top\n\nIntro.\n\n" + "".join(f"## Part {i}\n\nShort text {i}.\n\n" for i in range(5))
    chunks = markdown_sections(text, 2000)
    check_chunks(text, chunks, 2000)
    assert [t.split("\n", 1)[0] for t in spans(text, chunks)] == ["# Top", *(f"## Part {i}" for i in range(5))]
    assert [c.context for c in chunks] == ["", *["Top"] * 5]
    packed = chunk_markdown(text, 2000)
    assert len(packed) == 1  # the chunker proper packs them all into one chunk


def test_sections_layer_splits_an_oversized_section() -> None:
    """A section larger than the target is split by paragraphs; its pieces carry its path."""
    body = "".join(f"Paragraph {i} of the long section.\n\n" for i in range(30))
    text = f"# Guide\n\n## Long\n\n{body}## Next\n\nEnd.\n"
    chunks = markdown_sections(text, 2000, target_size=300)
    check_chunks(text, chunks, 2000, 300)
    inner = [c for c in chunks if "Paragraph" in text[c.start : c.end]]
    assert len(inner) > 3 and all(c.context in ("Guide", "Guide > Long") for c in inner)
    assert text[chunks[-1].start : chunks[-1].end] == "## Next\n\nEnd.\n"


TABLE = (
    """# Models

Intro line.

## Text

| Architecture | Models | LoRA |
|--------------|--------|------|
"""
    + "".join(f"| `Arch{i}ForCausalLM` | Model family {i} | yes |\n" for i in range(30))
    + "\nAfter the table.\n"
)


def test_table_windows_carry_the_header() -> None:
    """Runs of table rows up to the size, header row in the context, first window at the header."""
    windows = table_windows(TABLE, 200, 2000)
    header_at = TABLE.index("| Architecture")
    assert windows[0].start == header_at
    assert TABLE[windows[0].start : windows[0].end].count("\n") >= 2  # header, rule, first row(s)
    assert all(w.end - w.start <= 200 for w in windows)
    assert all(w.context == "Models > Text\nArchitecture | Models | LoRA" for w in windows)
    rows = [line for w in windows for line in TABLE[w.start : w.end].split("\n")]
    assert sum("ForCausalLM" in r for r in rows) == 30  # every row in exactly one window
    assert all(TABLE[w.end - 1] == "|" for w in windows)  # ends on a row, no trailing newline
    assert table_windows("no table | here\njust text\n", 200, 2000) == []
    assert table_windows("| a | b |\n| c | d |\n", 200, 2000) == []  # no delimiter row


def test_table_row_longer_than_the_window_is_alone() -> None:
    """A row longer than the window size is one window; one over ``max_chunk_size`` is dropped."""
    text = "| h | i |\n|---|---|\n| " + "x" * 300 + " | y |\n| short | row |\n| " + "z" * 3000 + " | w |\n"
    windows = table_windows(text, 100, 2000)
    assert [text[w.start : w.end].count("x") for w in windows] == [300, 0]  # header + first row, short row
    assert all(w.end - w.start <= 2000 and "z" not in text[w.start : w.end] for w in windows)


def test_markdown_layers_add_only_new_spans() -> None:
    """Layers of a Markdown file: sections and windows, none equal to a primary chunk, sorted."""
    primary = chunk_file("a.md", TABLE, 2000)
    layers = markdown_layers("docs/a.md", TABLE, 2000, None, 200, primary)
    assert layers == sorted(layers, key=lambda c: (c.start, c.end))
    assert not {(c.start, c.end) for c in layers} & {(c.start, c.end) for c in primary}
    assert len({(c.start, c.end) for c in layers}) == len(layers)
    assert any("Architecture" in c.context for c in layers)  # table windows
    assert any(TABLE[c.start :].startswith("## Text") for c in layers)  # the section alone
    assert all(c.end - c.start <= 2000 for c in layers)
    assert markdown_layers("a.py", TABLE, 2000, None, 200, []) == []
    assert markdown_layers("a.md", "", 2000, None, 200, []) == []
    rst = markdown_layers("a.rst", TABLE, 2000, None, 200, [])
    assert rst and not any("Architecture" in c.context for c in rst)  # no table windows in reST


def test_setext_and_front_matter() -> None:
    """Setext underlines are headings; YAML front matter delimiters are not."""
    text = "---\ntitle: Doc\n---\n\nGuide\n=====\n\nIntro text here.\n\nUsage\n-----\n\nRun it.\n"
    chunks = chunk_markdown(text, 2000, target_size=20)
    check_chunks(text, chunks, 2000, 20)
    usage = next(c for c in chunks if text[c.start : c.end].startswith("Usage"))
    assert usage.context == "Guide"
    assert all("title" not in c.context for c in chunks)


def test_rst_underlined_headings() -> None:
    """reStructuredText headings: underline (and overline) styles give levels."""
    text = (
        "=====\nTitle\n=====\n\nIntro.\n\nSection\n-------\n\nBody of the section.\n\n"
        "Sub\n~~~\n\nDeeper text here.\n\nOther\n-----\n\nMore.\n"
    )
    chunks = chunk_file("doc.rst", text, 2000, 25)
    check_chunks(text, chunks, 2000, 25)
    contexts = {text[c.start : c.end].split("\n", 1)[0]: c.context for c in chunks}
    assert contexts["Sub"] == "Title > Section"
    assert contexts["Other"] == "Title"


def test_crlf_markdown() -> None:
    """Markdown with CRLF line breaks keeps exact offsets."""
    text = MARKDOWN.replace("\n", "\r\n")
    chunks = chunk_markdown(text, 2000, target_size=200)
    check_chunks(text, chunks, 2000, 200)
    cuda = next(c for c in chunks if text[c.start : c.end].startswith("### CUDA\r\n"))
    assert cuda.context == "Installation > GPU"
    assert on_line_starts(text, chunks)


def test_plain_text_paragraphs() -> None:
    """Plain text packs paragraphs; a long line is cut between words."""
    text = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(10)) + "\n"
    chunks = chunk_plain(text, 2000, 400)
    check_chunks(text, chunks, 2000, 400)
    assert all(text[c.start : c.end].startswith("Paragraph") for c in chunks)
    line = "α" + " lorem ipsum" * 100_000
    check_chunks(line, chunk_plain(line, 2000), 2000)


@pytest.mark.parametrize(
    "text",
    ["", " ", "\n\n\r\n\t \x0c", "\ufeff", "\x00", "x" * 5000, "é" * 4001 + "\n", "\t\tx\t\n"],
    ids=["empty", "space", "blank", "bom", "nul", "long-word", "non-ascii", "tabs"],
)
@pytest.mark.parametrize("name", ["a.py", "a.md", "a.rst", "a.txt"])
def test_edge_texts(name: str, text: str) -> None:
    """Degenerate files satisfy the invariants with every chunker."""
    for size in SIZES:
        check_chunks(text, chunk_file(name, text, size), size)
    if not text.strip():
        assert chunk_file(name, text, 2000) == []


def one_line(kind: str, size: int) -> str:
    """A single line of about ``size`` characters: a Python string literal or prose."""
    if kind == "literal":
        return "x = '" + "ab c" * (size // 4) + "'\n"
    return "α" + " lorem ipsum" * (size // 12)


def work(chunker: Callable[[], object]) -> int:
    """Python lines executed (comprehensions included) and functions called while ``chunker()`` runs.

    A count of work, deterministic, unlike a clock on a shared machine.
    """
    count = 0

    def trace(_frame: FrameType, _event: str, _arg: Any) -> Any:  # sys.settrace's signature
        nonlocal count
        count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        chunker()
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("kind", ["literal", "prose"])
@pytest.mark.parametrize("name", ["big.py", "big.md", "big.txt"])
def test_one_megabyte_line_takes_linear_work(name: str, kind: str) -> None:
    """A 1 MB single line is chunked by every chunker, with work linear in its length.

    Work is counted in Python lines and calls (see :func:`work`): four times the text may cost
    at most 4.5 times the work, where a chunker rescanning the line at every cut would cost
    sixteen. The time itself is measured in ``benches/test_throughput.py``.
    """
    text = one_line(kind, 1_000_000)
    check_chunks(text, chunk_file(name, text, 2000, 800), 2000, 800)
    small, large = (work(partial(chunk_file, name, one_line(kind, n), 2000, 800)) for n in (20_000, 80_000))
    assert large < 4.5 * small


def test_dispatch_and_api() -> None:
    """File names choose the chunker; sizes are validated; everything pickles."""
    text = "# T\n\nbody\n"
    assert chunk_file("x/README.md", text, 100) == chunk_markdown(text, 100)
    assert chunk_file("x/a.inc.md", text, 100) == chunk_markdown(text, 100)
    assert chunk_file("x/a.PYI", "x = 1\n", 100) == chunk_python("x = 1\n", 100)
    assert chunk_file("x/CMakeLists.txt", text, 100) == chunk_plain(text, 100)
    with pytest.raises(ValueError):
        chunk_file("a.py", text, 100, 200)
    with pytest.raises(ValueError):
        chunk_file("a.py", text, 0)
    chunk = Chunk(1, 2, "ctx")
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    assert pickle.loads(pickle.dumps(chunk_file)) is chunk_file
    with pytest.raises(AttributeError):
        chunk.start = 3  # type: ignore[misc]


# -- properties -----------------------------------------------------------------------------

NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])
WORDS = st.text(alphabet=st.sampled_from("abcxyzé€😀_ \t"), min_size=0, max_size=30).map(lambda s: s.replace("\t", " "))
NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)


@st.composite
def python_blocks(draw: st.DrawFn, depth: int = 0) -> list[str]:
    """Lines of a syntactically valid Python block (relative indentation)."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5 if depth else 8))):
        kind = draw(st.sampled_from(["assign", "comment", "blank", "doc", "def", "class", "if"]))
        if kind == "assign":
            lines.append(f"{draw(NAMES)} = {draw(WORDS)!r}")
        elif kind == "comment":
            lines.append(f"# {draw(WORDS)}")
        elif kind == "blank":
            lines.append("")
        elif kind == "doc":
            lines.append(repr(draw(WORDS)))
        elif depth < 3:
            if kind != "if" and draw(st.booleans()):
                lines.append(f"@{draw(NAMES)}")
            header = {"def": f"def {draw(NAMES)}(x):", "class": f"class {draw(NAMES)}:"}
            lines.append(header.get(kind, f"if {draw(NAMES)}:"))
            body = draw(python_blocks(depth + 1))
            if all(not line.strip() or line.lstrip().startswith("#") for line in body):
                body.append("pass")
            lines.extend("    " + line if line else "" for line in body)
    return lines


@st.composite
def python_sources(draw: st.DrawFn) -> str:
    """Valid Python text with mixed line breaks and an optional BOM."""
    newline = draw(NEWLINES)
    text = newline.join(draw(python_blocks())) + draw(st.sampled_from(["", newline]))
    return draw(st.sampled_from(["", "\ufeff"])) + text


MARKDOWN_LINES = st.one_of(
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 7), WORDS),
    st.sampled_from(["```", "~~~", "```python", "# in fence?", "", "", "---", "===", "- item"]),
    WORDS,
    st.builds(lambda w, k: (w + " ") * k, WORDS, st.integers(1, 40)),
)


@st.composite
def markdown_sources(draw: st.DrawFn) -> str:
    """Markdown-like text: headings, fences, setext lines, paragraphs, long lines."""
    return draw(NEWLINES).join(draw(st.lists(MARKDOWN_LINES, max_size=60)))


ANY_TEXT = st.text(alphabet=st.one_of(st.characters(), st.sampled_from("\r\n\x00 \t#`=-\ufeff")), max_size=400)


def check_all_sizes(text: str, chunker: Callable[..., list[Chunk]]) -> None:
    """Check the invariants for several max sizes and targets."""
    for size in SIZES:
        for target in {size, max(1, size // 3)}:
            check_chunks(text, chunker(text, size, target), size, target)


@PROPERTY_SETTINGS
@given(python_sources())
def test_property_python(text: str) -> None:
    """Generated valid Python: invariants, and boundaries on line starts."""
    check_all_sizes(text, chunk_python)
    longest = max(len(line) for line in text.lstrip("\ufeff").splitlines() or [""])
    for size in SIZES:
        if longest + 2 < size:
            chunks = chunk_python(text, size)
            assert on_line_starts(text, chunks) or text.startswith("\ufeff")


@PROPERTY_SETTINGS
@given(markdown_sources())
def test_property_markdown(text: str) -> None:
    """Generated Markdown: invariants for Markdown and rst."""
    check_all_sizes(text, chunk_markdown)
    check_all_sizes(text, lambda *a: chunk_file("a.rst", *a))


@PROPERTY_SETTINGS
@given(markdown_sources())
def test_property_markdown_layers(text: str) -> None:
    """Generated Markdown: the sections layer keeps the invariants; every layer span is valid."""
    for size in SIZES:
        check_chunks(text, markdown_sections(text, 2000, size), 2000, size)
        layers = markdown_layers("a.md", text, 2000, size, size, [])
        fastrag._core.validate_spans(len(text), [(c.start, c.end) for c in layers], 2000)
        assert all(text[c.start : c.end].strip() for c in layers)


@PROPERTY_SETTINGS
@given(ANY_TEXT)
def test_property_any_text(text: str) -> None:
    """Arbitrary Unicode with CR, LF and NUL: invariants for every chunker."""
    for name in ("a.py", "a.md", "a.rst", "a.txt"):
        check_all_sizes(text, lambda *a, n=name: chunk_file(n, *a))


# -- the real corpus ------------------------------------------------------------------------


def test_corpus_invariants() -> None:
    """Every file of the vLLM corpus satisfies the invariants (needs ``make data``)."""
    if not CORPUS.is_dir():
        pytest.fail(f"corpus missing at {CORPUS}: run `make data` first")
    files = []
    for folder, _, names in os.walk(CORPUS):
        for name in names:
            if name.endswith((".py", ".md", ".txt")):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    files.append((path, handle.read()))
    assert len(files) > 1900
    for target in (2000, 800):
        for path, text in files:
            check_chunks(text, chunk_file(path, text, 2000, target), 2000, target)
