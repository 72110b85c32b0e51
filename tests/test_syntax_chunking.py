"""Tests of the tree-sitter chunker (:mod:`fastrag.indexing.chunking.syntax`): concrete layouts for
every grammar, properties on generated sources, and the real corpus."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import tree_sitter
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag.indexing.builder import build_index
from fastrag.indexing.chunking import Chunk, chunk_file, chunk_plain, chunk_syntax
from fastrag.indexing.chunking.grammars import CALL, GRAMMARS, parse, parser
from fastrag.indexing.chunking.python import parse_python
from fastrag.indexing.languages import GRAMMAR_OF_SUFFIX, LANGUAGES
from fastrag.indexing.symbols import EXTRA_DEFINITIONS, _definition_query, file_symbols
from test_chunking import CORPUS, NAMES, NEWLINES, PROPERTY_SETTINGS, WORDS, check_all_sizes, check_chunks, spans

ROOT = Path(__file__).resolve().parents[1]
#: Examples of each grammar's generated-code property (:data:`PROPERTY_SETTINGS` is for one property).
PER_GRAMMAR_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=40)


def whole(text: str, chunks: list[Chunk], snippet: str) -> Chunk:
    """The chunk holding all of ``snippet`` (which must occur once in ``text``)."""
    assert text.count(snippet) == 1, snippet
    start = text.index(snippet)
    holding = [c for c in chunks if c.start <= start and start + len(snippet) <= c.end]
    assert holding, f"{snippet[:40]!r} is cut between chunks: {spans(text, chunks)}"
    return holding[0]


# -- the tables ------------------------------------------------------------------------------


def test_every_grammar_loads_and_parses() -> None:
    """Every grammar a language names exists, loads from its wheel and parses a line of code."""
    named = {lang.grammar for lang in LANGUAGES if lang.grammar}
    assert named == set(GRAMMARS)
    for name in named:
        tree = parser(name).parse(b"x = 1;\n")
        assert tree.root_node.end_byte == 7


def test_grammar_tables_name_real_node_kinds() -> None:
    """Every scope, block and continuation kind of a grammar is a named node kind of it (a misspelt
    kind would silently never match)."""
    for name, grammar in GRAMMARS.items():
        language = parser(name).language
        assert language is not None
        for kind in grammar.scopes | grammar.blocks | grammar.continuations:
            assert language.id_for_node_kind(kind, True) is not None, (name, kind)


#: The named scopes of samples of :data:`SAMPLES`, by the names :meth:`Grammar.name_of` gives them.
SCOPE_NAMES = {
    ".cs": ["Demo", "Add", "Show"],
    ".php": ["App", "Box", "add", "show"],
    ".rb": ["Box", "add", "show"],
    ".swift": ["Box", "add", "show"],
    ".scala": ["demo", "Box", "add", "show"],
    ".ex": ["Demo.Box", "add", "show"],
    ".hs": ["Show", "showList", "show", "x", "y"],  # a ``let`` binding is a definition too
    ".lua": ["M.show"],
    ".zig": ["add", "show"],
    ".dart": ["Box", "add", "show"],
}


@pytest.mark.parametrize("suffix", sorted(SCOPE_NAMES))
def test_scopes_name_themselves(suffix: str) -> None:
    """Each grammar's definitions are scopes, named by their ``name`` field or, for Elixir's calls,
    by the called name of their first argument."""
    text = "\n".join(SAMPLES[suffix][:3]).encode()
    grammar = GRAMMARS[GRAMMAR_OF_SUFFIX[suffix]]
    names = []
    stack = [parser(GRAMMAR_OF_SUFFIX[suffix]).parse(text).root_node]
    while stack:
        node = stack.pop()
        if grammar.is_scope(node):
            name = grammar.name_of(node)
            names.append(name.text.decode() if name is not None and name.text is not None else "")
        stack.extend(reversed(node.children))
    assert [n for n in names if n] == SCOPE_NAMES[suffix]


def test_suffixes_pick_their_grammar() -> None:
    """CUDA and ``.h`` go through the C++ grammar, ``.c`` through C, ``.tsx`` through TSX."""
    assert GRAMMAR_OF_SUFFIX[".cu"] == GRAMMAR_OF_SUFFIX[".cuh"] == GRAMMAR_OF_SUFFIX[".h"] == "cpp"
    assert (GRAMMAR_OF_SUFFIX[".c"], GRAMMAR_OF_SUFFIX[".rs"], GRAMMAR_OF_SUFFIX[".tsx"]) == ("c", "rust", "tsx")
    assert ".py" not in GRAMMAR_OF_SUFFIX and ".md" not in GRAMMAR_OF_SUFFIX and ".toml" not in GRAMMAR_OF_SUFFIX


# -- concrete layouts ------------------------------------------------------------------------

RUST = """//! Crate docs.
use std::collections::HashMap;

/// A thing.
#[derive(Debug, Clone)]
pub struct Foo {
    a: i32,
    b: String,
}

impl Foo {
    /// Makes one with a café ☕ label.
    pub fn new(a: i32) -> Self {
        let b = format!("{}€", a);
        Foo { a, b }
    }

    // Sums things.
    fn bar(&self, xs: &[i32]) -> i32 {
        let mut total = 0;
        for x in xs {
            total += x * self.a;
        }
        total
    }
}

fn main() {
    let f = Foo::new(3);
    println!("{}", f.bar(&[1, 2, 3]));
}
"""


def test_rust_impl_lands_whole() -> None:
    """An ``impl`` block that fits the target is one chunk with its doc comments; so is a struct
    with its attribute, and a function; boundaries fall on line starts."""
    impl = RUST[RUST.index("impl Foo") : RUST.index("fn main")].rstrip()
    target = len(impl) + 100  # the impl and `main` fit together, the struct before them does not
    chunks = chunk_file("src/lib.rs", RUST, 2000, target)
    check_chunks(RUST, chunks, 2000, target)
    assert len(chunks) == 2
    assert whole(RUST, chunks, impl).context == ""
    whole(RUST, chunks, "/// A thing.\n#[derive(Debug, Clone)]\npub struct Foo {\n    a: i32,\n    b: String,\n}")
    starts = {0, *(m.end() for m in re.finditer("\n", RUST))}
    assert all(c.start in starts and c.end in starts for c in chunks)


def test_rust_nested_chunks_carry_signatures() -> None:
    """An oversized ``impl`` is split at its functions; an oversized function at its statements,
    and chunks inside carry the enclosing signatures (non-ASCII text before them included)."""
    chunks = chunk_file("src/lib.rs", RUST, 2000, 70)
    check_chunks(RUST, chunks, 2000, 70)
    loop = whole(RUST, chunks, "        for x in xs {\n            total += x * self.a;\n        }")
    assert loop.context == "impl Foo\nfn bar(&self, xs: &[i32]) -> i32"
    new = whole(RUST, chunks, 'let b = format!("{}€", a);')
    assert new.context == "impl Foo\npub fn new(a: i32) -> Self"
    header = whole(RUST, chunks, "impl Foo {")
    assert header.context == ""
    assert whole(RUST, chunks, "// Sums things.\n    fn bar(").context == "impl Foo"


CUDA = """#include <cuda_runtime.h>

namespace vllm {

// Root mean square of each row.
template <typename scalar_t>
__global__ void rms_norm_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                const float epsilon, const int hidden_size) {
  __shared__ float s_variance;
  float variance = 0.0f;
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = (float)input[blockIdx.x * hidden_size + idx];
    variance += x * x;
  }
  s_variance = rsqrtf(variance / hidden_size + epsilon);
}

class Launcher {
 public:
  void launch(int n) {
    rms_norm_kernel<float><<<n, 256, 0, stream_>>>(out_, in_, 1e-6f, n);
  }
};

}  // namespace vllm
"""


def test_cuda_kernel_goes_through_cpp() -> None:
    """A ``__global__`` template kernel (C++ grammar) is one chunk with its comment when it fits,
    and its statements carry the namespace and the kernel's signature when it does not."""
    kernel = CUDA[CUDA.index("// Root mean") : CUDA.index("class Launcher")].rstrip()
    target = len(kernel) + 80  # the kernel and the lines above it fit, the class after it does not
    chunks = chunk_file("csrc/layernorm.cu", CUDA, 2000, target)
    check_chunks(CUDA, chunks, 2000, target)
    assert len(chunks) == 2
    assert whole(CUDA, chunks, kernel) == chunks[0]
    assert whole(CUDA, chunks, "class Launcher {").context == "namespace vllm"
    chunks = chunk_file("csrc/layernorm.cu", CUDA, 2000, 150)
    check_chunks(CUDA, chunks, 2000, 150)
    loop = whole(CUDA, chunks, "    variance += x * x;\n  }")
    assert loop.context.split("\n") == [
        "namespace vllm",
        (
            "template <typename scalar_t> __global__ void rms_norm_kernel(scalar_t* __restrict__ out,"
            " const scalar_t* __restrict__ input, const float epsilon, const int hidden_size)"
        ),
    ]
    assert chunks == chunk_file("csrc/layernorm.cuh", CUDA, 2000, 150) == chunk_syntax("cpp", CUDA, 2000, 150)


#: One small file per grammar in three parts, each (with the comment above it) one chunk at the
#: target the test picks; a line of the third part's body, and the signatures it carries when that
#: part is split.
SAMPLES: dict[str, tuple[str, str, str, str, str]] = {
    ".c": (
        "#include <stdio.h>\n\n/* Adds. */\nstatic int add(int a, int b) {\n  return a + b;\n}\n",
        "struct point {\n  int x;\n  int y;\n};\n",
        'int main(void) {\n  printf("%d\\n", add(1, 2));\n  return 0;\n}\n',
        "  return 0;",
        "int main(void)",
    ),
    ".go": (
        'package main\n\nimport "fmt"\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n',
        "type Point struct {\n\tX int\n\tY int\n}\n",
        "func (p *Point) Show() {\n\tfmt.Println(p.X)\n\tfmt.Println(p.Y)\n}\n",
        "\tfmt.Println(p.Y)",
        "func (p *Point) Show()",
    ),
    ".java": (
        "package demo;\n\n/** A demo. */\npublic class Demo {\n",
        "    /** Adds. */\n    @Override\n    public int add(int a, int b) {\n        return a + b;\n    }\n",
        "    public void show(int n) {\n        System.out.println(n);\n        System.out.println(n + 1);\n    }\n}\n",
        "        System.out.println(n + 1);",
        "public class Demo\npublic void show(int n)",
    ),
    ".js": (
        "import fs from 'fs';\n\n// Reads a file.\nfunction read(path) {\n  return fs.readFileSync(path);\n}\n",
        "export class Store {\n  get(key) {\n    return this.map[key];\n  }\n}\n",
        "const show = (value) => {\n  console.log(value);\n  console.log(value + 1);\n};\n",
        "  console.log(value + 1);",
        "const show = (value) =>",
    ),
    ".ts": (
        "// Typed.\ninterface Point {\n  x: number;\n  y: number;\n}\n",
        "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
        "export class Box<T> {\n  value?: T;\n  open(): T | undefined {\n    return this.value;\n  }\n}\n",
        "  open(): T | undefined {",
        "export class Box<T>",
    ),
    ".tsx": (
        (
            "import React from 'react';\n\n// A view.\nexport function View(props: { name: string }) {\n"
            "  return <div>{props.name}</div>;\n}\n"
        ),
        "const answer: number = 42;\nconst label = `v${answer}`;\n",
        "export function Other() {\n  const x = 1;\n  return <span>{x}</span>;\n}\n",
        "  return <span>{x}</span>;",
        "export function Other()",
    ),
    ".kt": (
        "package demo\n\nimport kotlin.math.max\n\n/** Adds. */\nfun add(a: Int, b: Int): Int {\n    return a + b\n}\n",
        "object Registry {\n    val names = mutableListOf<String>()\n}\n",
        "class Box(val value: Int) {\n    fun show() {\n        println(value)\n        println(value + 1)\n    }\n}\n",
        "        println(value + 1)",
        "class Box(val value: Int)",
    ),
    ".sh": (
        "#!/bin/bash\nset -e\n\n# Builds.\nbuild() {\n  cargo build --release\n}\n",
        'if [ -n "$CI" ]; then\n  echo ci\nfi\n',
        'deploy() {\n  build\n  echo "deployed $1"\n  echo done\n}\n',
        "  echo done",
        "deploy()",
    ),
    ".cpp": (
        "#include <vector>\n\n// Holds things.\nnamespace store {\n",
        "template <typename T>\nclass Box {\n public:\n  T get() const { return value_; }\n  T value_;\n};\n",
        "int count(const std::vector<int>& xs) {\n  int n = 0;\n  for (int x : xs) n += x;\n  return n;\n}\n}\n",
        "  return n;",
        "namespace store\nint count(const std::vector<int>& xs)",
    ),
    ".cs": (
        "using System;\n\n/// <summary>A demo.</summary>\npublic class Demo\n{\n",
        "    /// <summary>Adds.</summary>\n    [Pure]\n    public int Add(int a, int b) => a + b;\n",
        "    public void Show(int n)\n    {\n        Console.WriteLine(n);\n        Debug.WriteLine(n);\n    }\n}\n",
        "        Debug.WriteLine(n);",
        "public class Demo\npublic void Show(int n)",
    ),
    ".php": (
        "<?php\n\nnamespace App;\n\n/** A box. */\nclass Box\n{\n",
        "    // Adds.\n    public function add(int $a, int $b): int\n    {\n        return $a + $b;\n    }\n",
        "    public function show(int $n): void\n    {\n        echo $n;\n        echo $n + 1;\n    }\n}\n",
        "        echo $n + 1;",
        "class Box\npublic function show(int $n): void",
    ),
    ".rb": (
        'require "a"\n\n# A box.\nclass Box < Base\n',
        "  # Adds.\n  def add(a, b)\n    a + b\n  end\n",
        "  def show(n)\n    puts n\n    puts n + 1\n  end\nend\n",
        "    puts n + 1",
        "class Box < Base\ndef show(n)",
    ),
    ".swift": (
        "import Foundation\n\n/// A box.\nextension Box {\n",
        "    /// Adds.\n    func add(_ a: Int, _ b: Int) -> Int {\n        return a + b\n    }\n",
        "    func show(n: Int) {\n        print(n)\n        print(n + 1)\n    }\n}\n",
        "        print(n + 1)",
        "extension Box\nfunc show(n: Int)",
    ),
    ".scala": (
        "package demo\n\n// A box.\nobject Box:\n",
        "  // Adds.\n  def add(a: Int, b: Int): Int =\n    a + b\n",
        "  def show(n: Int): Unit =\n    println(n)\n    println(n + 1)\n",
        "    println(n + 1)",
        "object Box\ndef show(n: Int): Unit =",
    ),
    ".ex": (
        'defmodule Demo.Box do\n  @moduledoc "A box."\n  alias Demo.Shape\n',
        "  # Adds.\n  def add(a, b), do: a + b\n",
        "  def show(n) when n > 0 do\n    IO.puts(n)\n    IO.puts(n + 1)\n  end\nend\n",
        "    IO.puts(n + 1)",
        "defmodule Demo.Box do\ndef show(n) when n > 0 do",
    ),
    ".hs": (
        "import Data.Map\n\n-- | Shows points.\ninstance Show Point where\n",
        "  -- | Shows a list.\n  showList ps = concatMap show ps\n",
        "  show p = do\n    let x = px p\n    let y = py p\n    show x ++ show y\n",
        "    let y = py p",
        "instance Show Point where\nshow p = do",
    ),
    ".lua": (
        "local M = {}\n\n-- Shows.\nfunction M.show(n)\n",
        "  -- Adds.\n  local add = function(a, b) return a + b end\n",
        "  local twice = function(x)\n    print(x)\n    print(x + 1)\n  end\nend\n",
        "    print(x + 1)",
        "function M.show(n)\nlocal twice = function(x)",
    ),
    ".zig": (
        'const s = @import("s");\n\n/// A point.\nconst Point = struct {\n',
        "    /// Adds.\n    pub fn add(a: i32, b: i32) i32 {\n        return a + b;\n    }\n",
        '    fn show(n: i32) void {\n        std.debug.print("{}", .{n});\n        log.info("{}", .{n});\n    }\n};\n',
        '        log.info("{}", .{n});',
        "const Point = struct\nfn show(n: i32) void",
    ),
    ".dart": (
        "import 'a';\n\n/// A box.\nclass Box {\n",
        "  /// Adds.\n  int add(int a, int b) {\n    return a + b;\n  }\n",
        "  void show(int n) {\n    print(n);\n    print(n + 1);\n  }\n}\n",
        "    print(n + 1);",
        "class Box\nvoid show(int n)",
    ),
}


@pytest.mark.parametrize("suffix", sorted(SAMPLES))
def test_definitions_land_whole(suffix: str) -> None:
    """In every grammar a definition that fits the target is one chunk; split further, its body
    carries the enclosing signatures."""
    first, second, third, probe, signature = SAMPLES[suffix]
    text = first + "\n" + second + "\n" + third
    target = max(len(first), len(second), len(third)) + 2
    assert len(text) > target
    chunks = chunk_file(f"src/sample{suffix}", text, 2000, target)
    check_chunks(text, chunks, 2000, target)
    for part in (first, second, third):
        whole(text, chunks, part.strip("\n"))
    small = chunk_file(f"src/sample{suffix}", text, 2000, len(third) - 10)
    check_chunks(text, small, 2000, len(third) - 10)
    assert whole(text, small, probe).context == signature


def test_trouble_falls_back_to_plain_text() -> None:
    """Text the grammar cannot read, nesting beyond the recursion limit and undecodable bytes are
    still chunked under the invariants."""
    garbage = "}}} fn ( {{ ]] <<< >>> ;;\n" * 200
    check_chunks(garbage, chunk_file("a.rs", garbage, 300), 300)
    nested = "void f() " + "{ if (x) " * 1500 + "y();" + " }" * 1500 + "\n"
    chunks = chunk_file("a.c", nested, 200)
    check_chunks(nested, chunks, 200)
    lone = 'fn main() {\n    let s = "\udcff\udcfe";\n' + "    x();\n" * 100 + "}\n"
    check_chunks(lone, chunk_file("a.rs", lone, 200), 200)
    assert chunk_syntax("bash", "", 100) == chunk_plain("", 100) == []


# -- properties ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Syntax:
    """Templates of one grammar: blocks (opening line, closing line) and single lines; ``N`` is
    replaced by a name and ``W`` by words; a first line every file starts with (PHP's ``<?php``)."""

    suffix: str
    blocks: tuple[tuple[str, str], ...]
    lines: tuple[str, ...]
    prologue: str = ""


SYNTAXES = (
    Syntax(
        ".rs",
        (("fn N(x: i32) -> i32 {", "}"), ("impl N {", "}"), ("mod N {", "}"), ("#[test]\nfn N() {", "}")),
        ('let N = "W";', 'N("W");', "// W", "/// W", "#[derive(Debug)]\nstruct N { a: i32 }"),
    ),
    Syntax(
        ".cu",
        (
            ("int N(int x) {", "}"),
            ("namespace N {", "}"),
            ("class N {", "};"),
            ("template <typename T>\n__global__ void N(T* x) {", "}"),
            ("#ifdef N", "#endif"),
        ),
        ('N = "W";', "// W", "/* W */", "N<<<1, 2>>>(x);", "#include <N.h>"),
    ),
    Syntax(".c", (("int N(void) {", "}"), ("struct N {", "};"), ("if (N) {", "}")), ('N = "W";', "/* W */", "// W")),
    Syntax(".go", (("func N(x int) int {", "}"), ("type N struct {", "}"), ("if N {", "}")), ('N := "W"', "// W")),
    Syntax(
        ".java",
        (("class N {", "}"), ("public void N(int x) {", "}"), ("@Override\nint N() {", "}")),
        ('String N = "W";', "// W", "/** W */"),
    ),
    Syntax(
        ".ts",
        (("function N(x) {", "}"), ("class N {", "}"), ("const N = (x) => {", "};"), ("interface N {", "}")),
        ('const N = "W";', "// W", 'N("W");'),
    ),
    Syntax(".tsx", (("function N() {", "}"), ("export class N {", "}")), ("return <div>W</div>;", "// W")),
    Syntax(".js", (("function N(x) {", "}"), ("N(x) {", "}")), ('let N = "W";', "// W")),
    Syntax(
        ".kt",
        (("fun N(x: Int): Int {", "}"), ("class N {", "}"), ("object N {", "}"), ("companion object {", "}")),
        ('val N = "W"', "// W", 'N("W")'),
    ),
    Syntax(".sh", (("N() {", "}"), ('if [ -n "$N" ]; then', "fi"), ("for N in a b; do", "done")), ('N="W"', "# W")),
    Syntax(
        ".cs",
        (("namespace N {", "}"), ("class N {", "}"), ("public void N(int x) {", "}"), ("[Obsolete]\nint N() {", "}")),
        ('string N = "W";', "// W", "/// W", "int N { get; set; }"),
    ),
    Syntax(
        ".php",
        (("function N($x) {", "}"), ("class N {", "}"), ("trait N {", "}"), ("if ($N) {", "}")),
        ('$N = "W";', "// W", "# W", "public function N() {}"),
        prologue="<?php",
    ),
    Syntax(
        ".rb",
        (("def N(x)", "end"), ("class N", "end"), ("module N", "end"), ("N.each do |x|", "end"), ("if N", "end")),
        ('N = "W"', "# W", 'N("W")', "attr_reader :N"),
    ),
    Syntax(
        ".swift",
        (("func N(x: Int) -> Int {", "}"), ("struct N {", "}"), ("extension N {", "}"), ("protocol N {", "}")),
        ('let N = "W"', "// W", "/// W", "@objc var N: Int = 0"),
    ),
    Syntax(
        ".scala",
        (("object N {", "}"), ("def N(x: Int): Int = {", "}"), ("class N:", "end N"), ("trait N:", "")),
        ('val N = "W"', "// W", "def N: Int = 1", "given N: Int = 1"),
    ),
    Syntax(
        ".ex",
        (("defmodule N do", "end"), ("def N(x) do", "end"), ("defp N(x) when x > 0 do", "end"), ("if N do", "end")),
        ('N = "W"', "# W", '@doc "W"', "def N(x), do: x"),
    ),
    Syntax(
        ".hs",
        (("class N a where", ""), ("instance N Int where", ""), ("N x = do", ""), ("N = case x of", "")),
        ('N = "W"', "-- W", "-- | W", "N :: Int", "data N = A | B"),
    ),
    Syntax(
        ".lua",
        (("function N(x)", "end"), ("local N = function()", "end"), ("if N then", "end"), ("N = {", "}")),
        ('local N = "W"', "-- W", 'N("W")'),
    ),
    Syntax(
        ".zig",
        (("fn N(x: i32) i32 {", "}"), ("const N = struct {", "};"), ('test "N" {', "}"), ("if (N) {", "}")),
        ('const N = "W";', "// W", "/// W", "N: i32,"),
    ),
    Syntax(
        ".dart",
        (("class N {", "}"), ("void N(int x) {", "}"), ("extension N on int {", "}"), ("mixin N {", "}")),
        ('var N = "W";', "// W", "/// W", "@override"),
    ),
)


@st.composite
def code_lines(draw: st.DrawFn, syntax: Syntax, depth: int = 0) -> list[str]:
    """Lines of a block of code in ``syntax`` (relative indentation)."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4 if depth else 7))):
        kind = draw(st.sampled_from(["line", "line", "blank", "block"]))
        if kind == "blank":
            lines.append("")
        elif kind == "line" or depth >= 3:
            template = draw(st.sampled_from(syntax.lines))
            lines.extend(template.replace("N", draw(NAMES)).replace("W", draw(WORDS)).split("\n"))
        else:
            opening, closing = draw(st.sampled_from(syntax.blocks))
            lines.extend(opening.replace("N", draw(NAMES)).split("\n"))
            lines.extend("    " + line if line else "" for line in draw(code_lines(syntax, depth + 1)))
            lines.append(closing)
    return lines


@st.composite
def code_sources(draw: st.DrawFn, syntax: Syntax) -> tuple[str, str]:
    """A file name and generated source in ``syntax``: mixed line breaks, an optional BOM, and now
    and then a line cut short (unbalanced code the parser must recover from)."""
    lines = draw(code_lines(syntax))
    if lines and draw(st.integers(0, 4)) == 0:
        index = draw(st.integers(0, len(lines) - 1))
        lines[index] = lines[index][: draw(st.integers(0, len(lines[index])))]
    if syntax.prologue:
        lines.insert(0, syntax.prologue)
    newline = draw(NEWLINES)
    text = draw(st.sampled_from(["", "\ufeff"])) + newline.join(lines) + draw(st.sampled_from(["", newline]))
    return f"src/file{syntax.suffix}", text


@pytest.mark.parametrize("syntax", SYNTAXES, ids=lambda syntax: syntax.suffix)
@PER_GRAMMAR_SETTINGS
@given(data=st.data())
def test_property_syntax(syntax: Syntax, data: st.DataObject) -> None:
    """Generated code in each grammar: every chunk inside the file, at most the target, every
    non-whitespace character covered, for several sizes."""
    path, text = data.draw(code_sources(syntax))
    check_all_sizes(text, lambda *a: chunk_file(path, *a))


def test_property_syntax_covers_every_grammar() -> None:
    """Every grammar has templates for the generated-code property."""
    assert {GRAMMAR_OF_SUFFIX[syntax.suffix] for syntax in SYNTAXES} == set(GRAMMARS)


@pytest.mark.parametrize("suffix", sorted({syntax.suffix for syntax in SYNTAXES}))
@PER_GRAMMAR_SETTINGS
@given(text=st.text(alphabet=st.characters(), max_size=300))
def test_property_syntax_any_text(suffix: str, text: str) -> None:
    """Arbitrary Unicode (lone surrogates, NUL, CR) through each grammar keeps the invariants."""
    check_all_sizes(text, lambda *a: chunk_file(f"a{suffix}", *a))


# -- the real corpus -------------------------------------------------------------------------


def test_corpus_syntax_invariants() -> None:
    """Every file of vLLM and of fastrag's own Rust core that a grammar reads satisfies the
    invariants (needs ``make data``); most of them are chunked along their syntax."""
    if not CORPUS.is_dir():
        pytest.fail(f"corpus missing at {CORPUS}: run `make data` first")
    files = []
    for root in (CORPUS, ROOT / "rust"):
        for folder, _, names in os.walk(root):
            for name in names:
                if os.path.splitext(name)[1].lower() in GRAMMAR_OF_SUFFIX:
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as handle:
                        files.append((path, handle.read()))
    assert len(files) > 300
    structured = 0
    for path, text in files:
        chunks = chunk_file(path, text, 2000, 800)
        check_chunks(text, chunks, 2000, 800)
        structured += chunks != chunk_plain(text, 2000, 800)
    assert structured > len(files) // 2


def test_chunker_and_symbols_share_one_parse(tmp_path: Path) -> None:
    """Indexing parses each file once: the symbols table gets the tree the chunker made (and the
    definitions are those a parse of its own finds)."""
    go = "package main\n\n"
    go += "".join(f"// F{i} does {i}.\nfunc F{i}() int {{\n\treturn {i}\n}}\n\n" for i in range(200))
    py = "".join(f"def f{i}():\n    '''Return {i}.'''\n    return {i}\n\n\n" for i in range(200))
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "main.go").write_text(go, encoding="utf-8")
    (tmp_path / "repo" / "mod.py").write_text(py, encoding="utf-8")
    parse.cache_clear()
    parse_python.cache_clear()
    build_index(tmp_path / "repo", tmp_path / "index", progress=False, workers=1)
    assert (parse.cache_info().misses, parse.cache_info().hits) == (1, 1)
    assert (parse_python.cache_info().misses, parse_python.cache_info().hits) == (1, 1)
    shared = file_symbols("main.go", go)
    parse.cache_clear()
    assert file_symbols("main.go", go) == shared
    assert [s.name for s in shared[1:]] == [f"F{i}" for i in range(200)]


@pytest.mark.parametrize("suffix", sorted(SAMPLES))
def test_the_definition_query_finds_what_a_walk_of_every_node_finds(suffix: str) -> None:
    """The symbols table's tree-sitter query captures exactly the nodes a walk of the whole tree
    takes for definitions (a scope of the grammar, a scope call or an extra definition kind)."""
    grammar = GRAMMAR_OF_SUFFIX[suffix]
    table = GRAMMARS[grammar]
    text = "\n".join(SAMPLES[suffix][:3])
    _, tree = parse(grammar, text)
    walked, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_named and (node.type in EXTRA_DEFINITIONS or table.is_scope(node)):
            walked.append((node.start_byte, node.end_byte, node.type))
        stack.extend(reversed(node.children))
    captured = tree_sitter.QueryCursor(_definition_query(grammar)).captures(tree.root_node).get("definition", [])
    found = sorted((n.start_byte, n.end_byte, n.type) for n in captured if n.type != CALL[0] or table.is_scope(n))
    assert walked and found == sorted(walked)
