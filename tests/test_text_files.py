"""Which files of a repository count (:mod:`fastrag.indexing.corpus`, :mod:`fastrag.indexing.languages`):
every text file of any suffix, not lock files, minified bundles, source maps, data formats or generated
content; the summary says what was skipped and why; degenerate trees fail with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CliResult, run_cli, write_repo
from fastrag.errors import UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.corpus import BINARY, EMPTY, GENERATED, GENERATED_LINE, INDEX_MARKER, TOO_LARGE, text_of
from fastrag.indexing.generations import LOCK_FILE, current_generation, load_index
from fastrag.indexing.languages import HIDDEN, is_language, kept_out, language_arg

#: Text files of kinds no language lists: each is indexed as text.
UNLISTED = {
    "db/schema.sql": "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total_cents INTEGER);\n",
    "proto/billing.proto": 'syntax = "proto3";\nmessage Invoice { int64 total_cents = 1; }\n',
    "android/build.gradle": "dependencies { implementation 'com.squareup:okhttp:4.12.0' }\n",
    "web/Invoice.vue": "<template><p>{{ invoice.totalCents }}</p></template>\n",
    "web/Badge.svelte": "<script>export let label;</script>\n<span>{label}</span>\n",
    "app/views/show.html.erb": "<h1><%= @invoice.number %></h1>\n",
    "infra/main.tf": 'resource "aws_s3_bucket" "invoices" { bucket = "invoices" }\n',
    "flake/default.nix": "{ pkgs }: pkgs.mkShell { buildInputs = [ pkgs.ruby ]; }\n",
    "lib/templates/page.heex": "<div class={@class}><%= render_slot(@inner_block) %></div>\n",
}
#: Files kept out, with the reason the summary gives.
KEPT = {
    "yarn.lock": ("# yarn lockfile v1\nleft-pad@^1.3.0:\n  version 1.3.0\n", "lock file"),
    "Cargo.lock": ('[[package]]\nname = "serde"\nversion = "1.0.0"\n', "lock file"),
    "web/package-lock.json": ('{"lockfileVersion": 3}\n', "lock file"),
    "web/vendor.min.js": ("var a=1;\n", "minified bundle"),
    "web/app.js.map": ('{"version":3,"mappings":"AAAA"}\n', "source map"),
    "data/rates.csv": ("currency,rate\nEUR,1.08\n", "data format"),
    "web/bundle.js": ("!function(){" + "a=b+c;" * (GENERATED_LINE // 6 + 1) + "}();\n", GENERATED),
    "NOTES": ("\n  \n", EMPTY),
    "LICENSE": ("Permission is hereby granted, free of charge, to any person obtaining a copy.\n", "legal text"),
    "PKG-INFO": ("Metadata-Version: 2.1\nName: billing\n", "generated package metadata"),
    "logo.png": ("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", BINARY),
}


def index_summary(result: CliResult) -> str:
    """The one ``skipped N files: ...`` line of an ``index`` run (no traceback)."""
    assert "Traceback" not in result.err, result.err
    lines = [line for line in result.err.splitlines() if line.startswith("skipped ")]
    assert len(lines) == 1, result.err
    return lines[0]


def test_kept_out_by_name() -> None:
    """Lock files, legal texts, minified bundles, source maps, data formats and package metadata are
    kept out by name (a module named ``license.py`` is code); JSON configuration by its usual names and
    listed hidden files are not; unlisted hidden files are."""
    assert kept_out("yarn.lock") == kept_out("Gemfile.lock") == kept_out("pnpm-lock.yaml") == "lock file"
    assert kept_out("jquery.min.js") == kept_out("site.min.css") == "minified bundle"
    assert kept_out("app.js.map") == "source map" and kept_out("tuning.json") == "data format"
    assert kept_out(".env") == kept_out(".gitignore") == HIDDEN
    assert kept_out("LICENSE") == kept_out("LICENSE.md") == kept_out("COPYING") == "legal text"
    assert kept_out("LICENSE-APACHE") == kept_out("LICENSE_MIT.txt") == kept_out("COPYING-LGPL") == "legal text"
    kept = ("package.json", ".eslintrc.json", ".rubocop.yml", "schema.sql", "Gemfile", "license.py", "app.js")
    for name in (*kept, "license-faq.md", "LICENSE-helpers.py"):
        assert kept_out(name) is None, name


def test_text_of_tells_text_from_the_rest() -> None:
    """Binary, generated (one enormous line almost without spaces) and empty unlisted files are not
    text; prose on one enormous line, an empty listed file and a long test literal are."""
    for data in (b"\x00\x01", "caf\xe9".encode("latin-1"), "\u2603".encode()[:-1]):
        assert getattr(text_of("a.bin", data), "reason", None) == BINARY
    minified = ("x=" + "ab" * GENERATED_LINE + "\n").encode()
    assert getattr(text_of("dist/app.js", minified), "reason", None) == GENERATED
    prose = ("the quick brown fox " * (GENERATED_LINE // 10)).encode()
    assert text_of("story", prose) == prose.decode()
    literal = ("x = '" + "\U0001f600" * 9000 + "'\n").encode()
    assert text_of("emoji.ts", literal) == literal.decode()
    assert getattr(text_of("NOTES", b" \n"), "reason", None) == EMPTY
    assert text_of("pkg/__init__.py", b"") == ""


def test_every_text_file_counts_and_the_summary_says_why_others_do_not(tmp_path: Path) -> None:
    """Unlisted text files are indexed and searchable (``--lang text``); the kept-out files are
    reported with their reasons in one summary line; hidden files are not read at all."""
    files = {rel: text for rel, (text, _) in KEPT.items()} | UNLISTED
    files |= {".env": "STRIPE_SECRET=sk_live_must_not_be_indexed\n", "Gemfile": "gem 'rails'\n"}
    write_repo(tmp_path / "repo", files)
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path)
    assert result.code == 0, result.err
    summary = index_summary(result)
    assert summary.startswith(f"skipped {len(KEPT)} files: ")
    for reason in {reason for _, reason in KEPT.values()}:
        assert f"{reason}: " in summary, (reason, summary)
    table = load_index(tmp_path / "data/processed").chunks
    indexed = {table.paths[f] for f in set(table.file)}
    assert indexed == {f"repo/{rel}" for rel in UNLISTED} | {"repo/Gemfile"}
    search = run_cli("search", "invoices total_cents table", "--lang", "text", "--k", "3", cwd=tmp_path)
    assert search.code == 0 and "repo/db/schema.sql" in search.out, search.err
    secret = run_cli("search", "STRIPE_SECRET sk_live_must_not_be_indexed", cwd=tmp_path)
    assert ".env" not in secret.out
    assert is_language(language_arg("text"), "db/schema.sql") and not is_language(language_arg("text"), "a.py")
    assert is_language(language_arg("ruby"), "Gemfile") and is_language(language_arg("elixir"), "mix.exs")


# -- degenerate trees: one line, no traceback, no index written or changed --------------------------


def fails_cleanly(workdir: Path, *needles: str) -> None:
    """``index`` of ``workdir/repo`` fails with one ``fastrag: error:`` line naming ``needles``, and the
    index that was live before (if any) is still live."""
    before = current_generation(workdir / "data/processed")
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=workdir)
    messages = [line for line in result.err_lines if not line.startswith("chunking:")]  # the progress bar
    assert result.code == 1 and len(messages) == 1 and messages[0].startswith("fastrag: error: "), result.err
    for needle in needles:
        assert needle in result.err, (needle, result.err)
    assert current_generation(workdir / "data/processed") == before


@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-an-index"])
def test_a_tree_of_binary_files_only(tmp_path: Path, previous: bool) -> None:
    if previous:
        write_repo(tmp_path / "repo")
        assert run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path).code == 0
        for path in (tmp_path / "repo").rglob("*.*"):
            path.unlink()
    write_repo(tmp_path / "repo", {"a.png": "\x89PNG\x00\x00", "lib/b.so": "\x7fELF\x00", "c.dat": "\x00" * 10})
    fails_cleanly(tmp_path, "no readable text files under repo", "skipped 3 files", BINARY)
    if not previous:
        left = {p.name for p in (tmp_path / "data/processed").glob("*")}
        # the writers' lock and the folder's marker may stay; no generation, pointer or staging
        assert left <= {LOCK_FILE, INDEX_MARKER}, left


def test_invalid_utf8_in_a_new_language(tmp_path: Path) -> None:
    """A Ruby file in Latin-1 is skipped as not UTF-8 beside a valid Elixir file; alone, it fails."""
    repo = tmp_path / "repo"
    write_repo(repo, {"lib/app.ex": "defmodule App do\n  def run, do: :ok\nend\n"})
    (repo / "lib/caf\u00e9.rb").write_bytes("# caf\xe9 cr\xe8me\nclass Caf\xe9; end\n".encode("latin-1"))
    result = run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=tmp_path)
    assert result.code == 0 and index_summary(result) == f"skipped 1 files: lib/caf\u00e9.rb ({BINARY})"
    (repo / "lib/app.ex").unlink()
    fails_cleanly(tmp_path, "no readable text files under repo", BINARY)


def test_a_10_mb_single_line_file(tmp_path: Path) -> None:
    """Too large to be source: skipped without being read; alone in a tree, one line. Under the
    size bound, one enormous line almost without spaces is generated content."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "dist.js").write_bytes(b"a" * (10 * 2**20))
    fails_cleanly(tmp_path, "no indexable files under repo", f"dist.js ({TOO_LARGE})")
    (repo / "dist.js").write_bytes(b"var a=" + b"1+" * 2**20 + b"1;")
    fails_cleanly(tmp_path, "no readable text files under repo", GENERATED)


def test_build_index_error_names_what_was_skipped(tmp_path: Path) -> None:
    write_repo(tmp_path / "repo", {"yarn.lock": "x\n", "data.csv": "a,b\n"})
    with pytest.raises(
        UserError, match=r"^no indexable files under .*repo \(skipped 2 files: data\.csv \(data format\)"
    ):
        build_index(tmp_path / "repo", tmp_path / "index", IndexParams(), progress=False)
