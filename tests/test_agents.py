"""The per-repository index, definitions, references and outlines (issue 28; issue 29, item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE_FILES, CliResult, write_repo
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import load_index
from fastrag.indexing.symbols import file_symbols, kind_of, module_name
from fastrag.retrieval.references import find_references
from fastrag.retrieval.symbols import definition_name, find_definitions, outline
from fastrag.workspace import Workspace, default_index_note

RUST = """// the store
/// Builds an Engine.
pub struct Engine {
    size: usize,
}

impl Engine {
    pub fn new(size: usize) -> Self {
        let label = "Engine in a string";
        Engine { size }
    }
}

struct Forward;
"""
CPP = """class Engine;

class Engine {
 public:
  int run();  // Engine runs
};
"""


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> CliResult:
    """``python -m fastrag ARGS`` in ``cwd``, models in a folder of the test (never the user's cache)."""
    environ = {**os.environ, "PYTHONIOENCODING": "utf-8", "FASTRAG_MODELS_DIR": str(cwd / ".models-of-test")}
    proc = subprocess.run(
        [sys.executable, "-m", "fastrag", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**environ, **(env or {})}, check=False,
    )  # fmt: skip
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture()
def repository(tmp_path: Path) -> Path:
    """A git repository (a ``.git`` folder) holding the sample files and a Rust file, with a subfolder."""
    root = write_repo(tmp_path / "proj", {**SAMPLE_FILES, "src/engine.rs": RUST, "src/engine.h": CPP})
    (root / ".git").mkdir()
    return root


def test_workspace_layouts(tmp_path: Path, repository: Path) -> None:
    """fastrag's checkout keeps the exercise's defaults; elsewhere the repository found above the working
    directory, its index in .fastrag/index."""
    checkout = Path(__file__).resolve().parents[1]
    project = Workspace.detect(checkout)
    assert project.project and project.index_dir == Path("data/processed")
    assert project.repo_path == Path("data/raw/vllm-0.10.1") and project.models_dir == Path("data/models")
    inside = Workspace.detect(repository / "pkg")
    assert not inside.project and inside.root == repository
    assert inside.index_dir == repository / ".fastrag" / "index"
    loose = tmp_path / "loose"
    loose.mkdir()
    assert Workspace.detect(loose).root == loose  # no repository above: the folder itself
    science = tmp_path / "science"  # a data-science layout is a repository, not fastrag's checkout
    for folder in ("data/raw", "data/processed", "data/models", ".git"):
        (science / folder).mkdir(parents=True)
    assert not Workspace.detect(science).project and Workspace.detect(science).root == science
    (science / "data/processed/CURRENT").write_text("gen-0\n")  # a fastrag index there: the exercise's layout
    assert Workspace.detect(science).project


def test_index_and_search_from_inside_a_repository(repository: Path) -> None:
    """`fastrag index` then `search`, `definitions` and `outline` from subfolders, no flags; results named
    relative to the repository; git told to ignore the index."""
    built = cli("index", "--vectors", "none", cwd=repository / "pkg")
    assert built.code == 0, built.err
    assert (repository / ".fastrag/index/CURRENT").is_file()
    assert (repository / ".fastrag/.gitignore").read_text().splitlines()[-1] == "*"
    assert not (repository / "pkg/data").exists()
    found = cli("search", "load a LoRA adapter at runtime", "--k", "3", cwd=repository / "docs")
    assert found.code == 0, found.err
    assert " pkg/engine.py:" in found.out or " docs/lora.md:" in found.out
    assert found.err_lines == []  # the repository's own index: no note
    defined = cli("definitions", "LLMEngine", cwd=repository / "src")
    assert defined.code == 0 and defined.out.split("\n")[0].split()[1:4] == ["class", "LLMEngine", "pkg/engine.py:6-14"]
    tree = cli("outline", "src/engine.rs", cwd=repository)
    assert tree.code == 0, tree.err
    assert [line.split()[-2:] for line in tree.out.splitlines()[1:]] == [
        ["type", "Engine"], ["impl", "Engine"], ["method", "new"], ["type", "Forward"]
    ]  # fmt: skip


def test_note_when_the_default_index_is_of_another_repository(tmp_path: Path, repository: Path) -> None:
    """A defaulted index built from another repository gets one stderr note; an explicit --index_dir none."""
    other = write_repo(tmp_path / "other", {"lib/tool.py": "def tool():\n    return 1\n"})
    built = cli("index", "--repo_path", str(other), "--index_dir", str(repository / ".fastrag/index"),
                "--vectors", "none", cwd=tmp_path)  # fmt: skip
    assert built.code == 0, built.err
    found = cli("definitions", "tool", cwd=repository)
    assert found.code == 0 and "tool" in found.out
    assert len(found.err_lines) == 1 and found.err_lines[0].startswith("fastrag: note: the index in ")
    assert str(other) in found.err_lines[0]
    explicit = cli("definitions", "tool", "--index_dir", str(repository / ".fastrag/index"), cwd=repository)
    assert explicit.code == 0 and explicit.err_lines == []
    assert default_index_note(repository / ".fastrag/index", tmp_path / "nowhere") is None  # not in a repository


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("definitions", ""), "the name is empty"),
        (("definitions", "two words"), "a name is one identifier"),
        (("references", "a::b"), "not a qualified name"),
        (("references", "x", "--limit", "0"), "--limit must be between 1 and 100000"),
        (("outline", "nowhere.py"), "nowhere.py is not a file of the index"),
        (("outline", ""), "path is empty"),
        (("references", "x", "--lang", "klingon"), "--lang must be one of"),
    ],
)
def test_bad_input_is_one_line(repository: Path, args: tuple[str, ...], message: str) -> None:
    """Every bad argument: exit 2, one line naming it; the index is untouched."""
    assert cli("index", "--vectors", "none", cwd=repository).code == 0
    before = (repository / ".fastrag/index/CURRENT").read_text()
    result = cli(*args, cwd=repository)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("fastrag: error: ") and message in result.err_lines[0]
    assert (repository / ".fastrag/index/CURRENT").read_text() == before


def test_grep_exits_1_when_no_line_matches(repository: Path) -> None:
    """As grep and rg: status 0 with matches, 1 with none (a plain note on stderr, nothing on stdout)."""
    assert cli("index", "--vectors", "none", cwd=repository).code == 0
    found = cli("grep", "class LLMEngine", cwd=repository)
    assert found.code == 0 and found.out.startswith("pkg/engine.py:"), found.err
    missed = cli("grep", "no_such_text_anywhere", cwd=repository)
    assert (missed.code, missed.out) == (1, "") and missed.err_lines == ["fastrag: no match in 6 files"], missed.err


def test_a_scripts_main_block_defines_nothing() -> None:
    """``console = Console()`` in a module's ``if __name__ == "__main__":`` demo is a local variable of the
    script, not a definition; module- and class-level names, and those under other ifs, stay definitions."""
    source = """
from rich.console import Console

console = Console()
if TYPE_CHECKING:
    Alias = int


class Live:
    console = Console()

    def run(self) -> None:
        console = Console()


if __name__ == "__main__":
    console = Console()

    def demo() -> None:
        pass
"""
    found = [(s.name, s.kind, s.first) for s in file_symbols("live.py", source)[1:]]
    assert found == [("console", "variable", 4), ("Alias", "variable", 6), ("Live", "class", 9),
                     ("console", "variable", 10), ("run", "method", 12)]  # fmt: skip


def test_symbols_of_each_parser() -> None:
    """Python (ast) and tree-sitter definitions: names, kinds, lines, signatures, parents."""
    python = file_symbols("pkg/engine.py", SAMPLE_FILES["pkg/engine.py"])
    assert [(s.name, s.kind, s.first, s.last) for s in python] == [
        ("engine", "module", 1, 19), ("LLMEngine", "class", 6, 14), ("__init__", "method", 9, 10),
        ("add_request", "method", 12, 14), ("load_lora_adapter", "function", 17, 19),
    ]  # fmt: skip
    assert python[2].parent == 1 and python[1].parent == 0 and python[0].parent == -1
    assert python[3].signature == "def add_request(self, request_id: str, prompt: str) -> None:"
    rust = file_symbols("src/engine.rs", RUST)
    assert [(s.name, s.kind, s.parent) for s in rust] == [
        ("engine", "module", -1), ("Engine", "type", 0), ("Engine", "impl", 0), ("new", "method", 2),
        ("Forward", "type", 0),
    ]  # fmt: skip
    assert rust[3].signature == "pub fn new(size: usize) -> Self"
    cpp = file_symbols("src/engine.h", CPP)
    assert [(s.name, s.kind) for s in cpp[1:]] == [("Engine", "declaration"), ("Engine", "class")]
    assert file_symbols("broken.py", "def (:\n") == [file_symbols("broken.py", "")[0]]  # the module alone
    assert module_name("pkg/__init__.py") == "pkg" and module_name("a/b/Axios.js") == "Axios"
    assert kind_of("class_declaration") == "class" and kind_of("function_item") == "function"
    assert kind_of("trait_item") == "type" and kind_of("mod_item") == "module"


def test_definitions_ranked_and_kept_incrementally(tmp_path: Path) -> None:
    """The symbols table of a generation: exact case before another, a class before its forward
    declaration, tests after the library; an unchanged file's definitions survive an incremental build."""
    files = {
        "src/engine.h": CPP,
        "tests/test_engine.py": "class Engine:\n    pass\n",
        "lib/engine.py": "def engine():\n    pass\n",
        "lib/core.py": "class Engine:\n    '''The engine.'''\n",
    }
    repo = write_repo(tmp_path / "repo", files)
    build_index(repo, tmp_path / "index", IndexParams(embed="none"), display_root="repo", progress=False)
    index = load_index(tmp_path / "index")
    found = find_definitions(index.symbols, index.chunks.paths, "Engine")
    assert [(d.kind, d.path) for d in found] == [  # exact case; kind; outside tests; in a file named after it
        ("class", "repo/src/engine.h"), ("class", "repo/lib/core.py"), ("class", "repo/tests/test_engine.py"),
        ("declaration", "repo/src/engine.h"), ("function", "repo/lib/engine.py"), ("module", "repo/src/engine.h"),
        ("module", "repo/lib/engine.py"),
    ]  # fmt: skip
    assert find_definitions(index.symbols, index.chunks.paths, "Core", ("lib",))[0].path == "repo/lib/core.py"
    typed = find_definitions(index.symbols, index.chunks.paths, "engine")  # lowercase: the case says nothing
    assert [(d.kind, d.path) for d in typed][:2] == [("class", "repo/src/engine.h"), ("class", "repo/lib/core.py")]
    (repo / "lib/new.py").write_text("ENGINE_SIZE = 3\n")
    build_index(repo, tmp_path / "index", IndexParams(embed="none"), display_root="repo", progress=False)
    again = load_index(tmp_path / "index")
    assert len(again.symbols) == len(index.symbols) + 2  # the new module and its constant
    assert find_definitions(again.symbols, again.chunks.paths, "ENGINE_SIZE")[0].kind == "constant"
    assert [n.name for n in outline(again, "repo/src/engine.h")] == ["Engine", "Engine"]
    manifest_files = json.loads((again.path / "files.json").read_text())
    assert len(manifest_files["lib/core.py"]) == 6  # the cache of incremental builds keeps the definitions


def test_index_without_symbols_is_rebuilt(tmp_path: Path) -> None:
    """A generation without its definitions (its symbols table gone, its files table without them): symbol
    lookups say the index is damaged and to index again, and the next build parses every file again (none
    is reused without its definitions)."""
    repo = write_repo(tmp_path / "repo", {"a.py": "def f():\n    pass\n"})
    build_index(repo, tmp_path / "index", IndexParams(embed="none"), display_root="repo", progress=False)
    gen = load_index(tmp_path / "index").path
    (gen / "symbols.json").unlink()
    raw = json.loads((gen / "files.json").read_text())
    (gen / "files.json").write_text(json.dumps({k: v[:5] for k, v in raw.items()}))
    from fastrag.errors import UserError

    with pytest.raises(UserError, match=r"damaged \(gen-[0-9a-f]+-[0-9]+/symbols.json: No such file"):
        _ = load_index(tmp_path / "index").symbols
    report = build_index(repo, tmp_path / "index", IndexParams(embed="none"), display_root="repo", progress=False)
    assert report.chunked == 1 and len(load_index(tmp_path / "index").symbols) == 2


def test_references_apart_in_comments_and_strings() -> None:
    """Every whole-word occurrence, told apart by the file's parser; a longer identifier is not one."""
    texts = {"src/engine.rs": RUST, "src/engine.h": CPP, "notes.md": "Engine notes", "a.py": PY_REFS}
    groups, total = find_references(sorted(texts), texts.get, "Engine")
    places = {(g.path, r.line, r.place) for g in groups for r in g.references}
    assert total == len(places) == 13
    assert ("src/engine.rs", 2, "comment") in places and ("src/engine.rs", 9, "string") in places
    assert ("src/engine.rs", 10, "code") in places and ("src/engine.h", 5, "comment") in places
    assert ("notes.md", 1, "text") in places
    assert {(line, place) for path, line, place in places if path == "a.py"} == {
        (1, "comment"),
        (2, "code"),
        (3, "string"),
        (4, "code" if sys.version_info >= (3, 12) else "string"),
    }  # fmt: skip  (before 3.12 the tokenizer gives an f-string as one string)


PY_REFS = """# Engine here
x = Engine()
y = "Engine"
z = f"{Engine} EngineRoom"
"""


def test_definition_names() -> None:
    """Qualified names split into the name and its qualifiers."""
    assert definition_name("absl::flat_hash_map") == ("flat_hash_map", ("absl",))
    assert definition_name(" vllm.LLMEngine ") == ("LLMEngine", ("vllm",))
    assert definition_name("Sinatra::Base") == ("Base", ("Sinatra",))
