"""Ignore files (:mod:`fastrag.indexing.ignores`): ``.gitignore`` at every level and
``.git/info/exclude`` in a git checkout, ``.fastragignore`` everywhere, ``index --no_ignore``;
malformed patterns and a ``.gitignore`` that ignores everything fail or warn with one line."""

from __future__ import annotations

from pathlib import Path

from conftest import CORPUS, run_cli, write_repo
from fastrag.indexing.corpus import walk
from fastrag.indexing.generations import current_generation

#: A checkout: what each ignore file leaves out, and what stays.
TREE = {
    ".gitignore": "# build output\n*.log\n/out/\n!keep.log\nnotes/draft-*\n",
    "src/.gitignore": "secret.py\n",
    "src/app.py": "def app(): pass\n",
    "src/secret.py": "TOKEN = 1\n",
    "src/lib/secret.py": "TOKEN = 2\n",  # src/.gitignore's pattern has no slash: any depth below src/
    "debug.log": "trace\n",
    "keep.log": "kept by a negated pattern\n",
    "out/main.c": "int main(void) { return 0; }\n",
    "tools/out/gen.c": "int gen(void) { return 0; }\n",  # /out/ is anchored at the root
    "notes/draft-1.md": "# draft\n",
    "notes/final.md": "# final\n",
    "local.md": "# excluded by .git/info/exclude\n",
    "vendor/dep.rb": "class Dep; end\n",
    "docs/.fastragignore": "*.rst\n",
    "docs/guide.rst": "Guide\n=====\n",
    "docs/guide.md": "# Guide\n",
}
KEPT = {"src/app.py", "keep.log", "tools/out/gen.c", "notes/final.md", "docs/guide.md"}


def checkout(root: Path, files: dict[str, str] = TREE) -> Path:
    """``files`` under ``root``, made a git checkout (``.git/info/exclude`` names local.md,
    ``.fastragignore`` names vendor/)."""
    write_repo(root, files)
    (root / ".git/info").mkdir(parents=True)
    (root / ".git/info/exclude").write_text("local.md\n")
    (root / ".fastragignore").write_text("vendor/\n")
    return root


def test_ignore_files_at_every_level(tmp_path: Path) -> None:
    entries, skipped = walk(checkout(tmp_path / "repo"))
    assert {e.rel_path for e in entries} == KEPT
    reasons = {s.rel_path: s.reason for s in skipped}
    assert reasons == {
        "debug.log": "ignored by .gitignore",
        "out/": "ignored by .gitignore",
        "notes/draft-1.md": "ignored by .gitignore",
        "src/secret.py": "ignored by src/.gitignore",
        "src/lib/secret.py": "ignored by src/.gitignore",
        "local.md": "ignored by .git/info/exclude",
        "vendor/": "ignored by .fastragignore",
        "docs/guide.rst": "ignored by docs/.fastragignore",
    }
    everything, none_skipped = walk(tmp_path / "repo", ignore=False)
    assert {e.rel_path for e in everything} == set(TREE) - {".gitignore", "src/.gitignore", "docs/.fastragignore"}
    assert none_skipped == []


def test_a_deeper_file_overrides_a_shallower_one(tmp_path: Path) -> None:
    repo = checkout(
        tmp_path / "repo", {".gitignore": "*.md\n", "a.md": "# a\n", "b/.gitignore": "!*.md\n", "b/c.md": "# c\n"}
    )
    assert [e.rel_path for e in walk(repo)[0]] == ["b/c.md"]


def test_gitignore_outside_a_checkout_is_not_applied(tmp_path: Path) -> None:
    """An unpacked release keeps its project's .gitignore but ships what it names: outside a git
    checkout only .fastragignore applies."""
    repo = write_repo(
        tmp_path / "repo", {".gitignore": "*.py\n", ".fastragignore": "*.md\n", "a.py": "x = 1\n", "b.md": "# b\n"}
    )
    entries, skipped = walk(repo)
    assert [e.rel_path for e in entries] == ["a.py"]
    assert [(s.rel_path, s.reason) for s in skipped] == [("b.md", "ignored by .fastragignore")]


def test_no_ignore_flag_indexes_ignored_files(tmp_path: Path) -> None:
    checkout(tmp_path / "repo")
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "ignored by .gitignore: 3" in result.err and "ignored by src/.gitignore: 2" in result.err
    hidden = run_cli("search", "TOKEN", "--k", "3", cwd=tmp_path)
    assert "secret.py" not in hidden.out
    again = run_cli("index", "--repo_path", "repo", "--vectors", "none", "--no_ignore", cwd=tmp_path)
    assert again.code == 0 and "indexed 13 files" in again.out, again.out + again.err
    found = run_cli("search", "TOKEN", "--k", "3", cwd=tmp_path)
    assert "repo/src/secret.py" in found.out and "repo/src/lib/secret.py" in found.out
    bad = run_cli("index", "--repo_path", "repo", "--no_ignore=maybe", cwd=tmp_path)
    assert bad.code == 2 and bad.err_lines == ["fastrag: error: --no_ignore must be true or false, got 'maybe'"]


def test_malformed_patterns_are_reported_and_the_rest_applies(tmp_path: Path) -> None:
    repo = checkout(tmp_path / "repo", {".gitignore": "*.log\n!\n[z-a]\nfoo\\\n", "a.py": "x = 1\n", "b.log": "y\n"})
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path)
    assert result.code == 0 and "Traceback" not in result.err, result.err
    summary = [line for line in result.err_lines if line.startswith("skipped ")]
    assert len(summary) == 1 and "malformed pattern '!', not applied" in summary[0], result.err
    assert "line 3: malformed pattern '[z-a]'" in summary[0] and "ignored by .gitignore: 1" in summary[0]
    assert [e.rel_path for e in walk(repo)[0]] == ["a.py"]


def test_a_gitignore_that_ignores_everything(tmp_path: Path) -> None:
    """One line naming the ignore file, no traceback; the index that was live stays live."""
    repo = checkout(tmp_path / "repo", {"a.py": "x = 1\n", "docs/b.md": "# b\n"})
    assert run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path).code == 0
    before = current_generation(tmp_path / "data/processed")
    (repo / ".gitignore").write_text("*\n")
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path)
    assert result.code == 1 and result.err_lines == [result.err_lines[-1]], result.err
    line = result.err_lines[0]
    assert line.startswith("fastrag: error: no indexable files under repo") and "ignored by .gitignore" in line
    assert "--no_ignore" in line
    assert current_generation(tmp_path / "data/processed") == before


def test_vllm_files_stay_the_same() -> None:
    """vLLM 0.10.1 is an unpacked release, not a checkout: its three .gitignore files (which name
    files the release ships) do not apply, so the walk finds exactly what it finds without ignores."""
    assert (CORPUS / ".gitignore").is_file()
    assert walk(CORPUS) == walk(CORPUS, ignore=False)
