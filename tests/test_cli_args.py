"""The command line is checked against the command's signature before anything runs, and documents itself.

For every command and every one of its flags, a one-letter typo of the flag and a wholly unknown
flag end in exit status 2 and one line naming it (with the nearest valid flag for the typo), and
leave the index folder (every file's sha256), the outputs folder and the models folder as they
were. Most cases run in-process through :func:`fastrag.cli.main`; a few run as a user would, in a
process of their own, against a real small index.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CliResult, run_cli, write_repo
from fastrag.answering.answer import answer_file
from fastrag.cli import Commands, main
from fastrag.cli.argv import Call, Help, parse
from fastrag.cli.signatures import Command, commands

KNOWN = commands(Commands)
DATASET = "sets/dataset_docs_args.json"
RESULTS = "data/output/search_results/dataset_docs_args.json"
ANSWERS = "answers.json"

#: For each command, arguments it would run with (and do work: build, write, listen) if nothing
#: stopped it; a bad flag is added to them (a command not listed gets the bad flag alone).
RUNS: dict[str, list[str]] = {
    "index": ["--repo_path", "other", "--index_dir", "data/processed", "--vectors", "none"],
    "search": ["load_lora_adapter endpoint", "--k", "3"],
    "search_dataset": ["--dataset_path", DATASET, "--k", "3"],
    "evaluate": ["--student_search_results_path", RESULTS, "--dataset_path", DATASET],
    "answer": ["Which endpoint loads a LoRA adapter?", "--k", "0"],
    "answer_dataset": ["--student_search_results_path", RESULTS, "--model", "smollm2"],
    "evaluate_answers": ["--answers_path", ANSWERS, "--dataset_path", DATASET],
    "serve": ["--host", "127.0.0.1", "--port", "0"],
    "mcp": ["--transport", "http", "--port", "0"],
}


def typo(command: Command, name: str) -> str:
    """A one-letter typo of ``--name`` that is no flag of ``command``: its last letter dropped, or doubled."""
    names = {f.name for f in command.flags} | {f"no{f.name}" for f in command.flags if f.switch}
    for wrong in (name[:-1], name + name[-1], name[:-1] + "x"):
        if len(wrong) > 1 and wrong not in names:
            return f"--{wrong}"
    raise AssertionError(f"no typo of --{name}")


def bad_lines() -> list[tuple[str, list[str], str]]:
    """``(command, argv, the error line)`` for every flag's typo and one unknown flag per command."""
    cases = []
    for name, command in KNOWN.items():
        for flag in command.flags:
            wrong = typo(command, flag.name)
            value = [] if flag.switch else ["1"]
            line = f"fastrag: error: unknown flag {wrong} for {name} (did you mean --{flag.name}?)"
            cases.append((name, [name, *RUNS.get(name, []), wrong, *value], line))
        line = f"fastrag: error: unknown flag --bogus for {name}"
        cases.append((name, [name, "--bogus", "1", *RUNS.get(name, [])], line))
    return cases


CASES = bad_lines()


def digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the sha256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def state(root: Path) -> dict[str, dict[str, str]]:
    """What a failed run must leave alone: the index, the outputs and the models folders."""
    return {d: digests(root / d) for d in ("data/processed", "data/output", "data/models")}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An indexed work directory with a second repository, a question set, its results, an answers file."""
    root = tmp_path_factory.mktemp("args")
    write_repo(root / "repo")
    write_repo(root / "other", {"blueprint.md": "# Blueprint\n\nThe blueprint of the other tree.\n"})
    question = {"question_id": "q1", "question": "load a LoRA adapter", "answer": "x", "sources": []}
    (root / DATASET).parent.mkdir(parents=True)
    (root / DATASET).write_text(json.dumps({"rag_questions": [question]}))
    answered = {"question_id": "q1", "question": "load a LoRA adapter", "retrieved_sources": [], "answer": "x"}
    (root / ANSWERS).write_text(json.dumps({"search_results": [answered]}))
    (root / "data/models/some-model").mkdir(parents=True)
    (root / "data/models/some-model/weights.bin").write_bytes(b"\x00weights")
    assert run_cli("index", "--repo_path", "repo", "--vectors", "none", cwd=root).code == 0
    assert run_cli("search_dataset", "--dataset_path", DATASET, cwd=root).code == 0
    return root


def test_every_flag_of_every_command_is_covered() -> None:
    """The cases come from the signatures: a new command or flag gets its cases without a line here."""
    assert set(RUNS) <= set(KNOWN), "RUNS names a command that does not exist"
    flags = {(name, f.name) for name, c in KNOWN.items() for f in c.flags}
    typoed = {(name, line.rpartition("--")[2].rstrip("?)")) for name, _, line in CASES if "did you mean" in line}
    assert typoed == flags
    assert all(parse(KNOWN, [name, *argv]) for name, argv in RUNS.items())  # the runs themselves are valid


@pytest.mark.parametrize(("command", "argv", "line"), CASES, ids=[" ".join(c[1][-2:]) + f" ({c[0]})" for c in CASES])
def test_a_bad_flag_changes_nothing(
    command: str, argv: list[str], line: str, project: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(project)
    before = state(project)
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.splitlines() == [line] and captured.out == ""
    assert state(project) == before


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["search", "lora", "--k", "3", "--k", "4"], "--k is given twice for search (it takes one value)"),
        (["index", "--vectors=none", "--vectors", "docs"], "--vectors is given twice for index (it takes one value)"),
        (["evaluate", "--show_missed", "--noshow_missed"], "--show_missed is given twice for evaluate"),
        (["search", "how", "do", "I"], "search: unexpected argument 'do' (positional arguments it takes: QUERY;"),
        (
            ["search", "lora", "--query", "lora"],
            "search: unexpected argument 'lora' (positional arguments it takes: none;",
        ),
        (["index", "data/raw/x"], "index: unexpected argument 'data/raw/x' (positional arguments it takes: none;"),
        (["search", "--k", "3"], "search: QUERY is required"),
        (["evaluate"], "evaluate: --student_search_results_path and --dataset_path are required"),
        (["search", "lora", "--k"], "--k needs a value (INT) for search"),
        (["serch", "lora"], "unknown command serch (did you mean search?)"),
        (["--k", "3"], "unknown flag --k"),
        (["search", "lora", "-mode", "lexical"], "unknown flag -mode for search (did you mean --mode?)"),
        (["index", "-r", "repo"], "-r is ambiguous for index: --repo_path, --repos, --ray"),
        (["evaluate", "--noshow_missed=1"], "--noshow_missed takes no value (write --show_missed=1)"),
        (["search", "lora", "--nok"], "unknown flag --nok for search (--k is not yes/no: give it a value)"),
    ],
)
def test_malformed_command_lines_are_refused_in_one_line(
    argv: list[str], line: str, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    before = state(project)
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("fastrag: error: " + line), err
    assert state(project) == before


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (["search", "q", "--k=3", "--mode", "lexical"], Call("search", ["--k=3", "--mode=lexical", "--query=q"])),
        (["search", "-k", "3", "q"], Call("search", ["--k=3", "--query=q"])),
        (["search", "--query", "q"], Call("search", ["--query=q"])),
        (["search", "--k", "-1", "q"], Call("search", ["--k=-1", "--query=q"])),  # a negative number is a value
        (["search", "--k", "3", "--", "--not-a-flag"], Call("search", ["--k=3", "--query=--not-a-flag"])),
        (["search-dataset", "--dataset-path", "d.json"], Call("search_dataset", ["--dataset_path=d.json"])),
        (["index", "--max-chunk-size", "500"], Call("index", ["--max_chunk_size=500"])),
        (["evaluate", "--student_search_results_path=r", "--dataset_path=d", "--show_missed"],
         Call("evaluate", ["--student_search_results_path=r", "--dataset_path=d", "--show_missed=True"])),
        (["evaluate", "--student_search_results_path=r", "--dataset_path=d", "--noshow_missed"],
         Call("evaluate", ["--student_search_results_path=r", "--dataset_path=d", "--show_missed=False"])),
        (["search", "q", "--path", "a/**", "--path=*.py"], Call("search", ["--path=a/**\n*.py", "--query=q"])),
        (["search", "q", "--repo"], Call("search", ["--repo=", "--query=q"])),  # refused by its own check
        (["search", "q", "--k", "3", "--help"], Help("search")),
        (["answer", "-h"], Help("answer")),
        (["serve", "-h"], Help("serve")),  # help, though --host starts with h
        (["-h"], Help(None)),
        (["--", "--help"], Help(None)),
        (["search", "--", "--help"], Help("search")),  # Fire's spelling
        (["search", "--query=-h"], Call("search", ["--query=-h"])),
        ([], Help(None)),
    ],
)  # fmt: skip
def test_accepted_syntax(argv: list[str], call: Call | Help) -> None:
    assert parse(KNOWN, argv) == call


@pytest.mark.parametrize("name", list(KNOWN))
def test_every_example_is_a_valid_command_line(name: str) -> None:
    example = KNOWN[name].example
    assert example.startswith(f"{name} "), f"{name} has no example (@example in fastrag/cli/commands.py)"
    assert isinstance(parse(KNOWN, shlex.split(example)), Call)


def check_help(text: str, command: Command, started: str = "fastrag") -> None:
    """``text`` is ``command``'s help, naming the program as it was ``started`` (in-process: ``fastrag``)."""
    for internal in ("Any", "FIRE_METADATA", "GROUP", "INFO:", "COMMAND |", "NAME\n"):
        assert internal not in text, (internal, text)
    assert f"usage: {started} {command.name}" in text
    assert f"example:\n  {started} {command.example}" in text
    for flag in command.flags:
        spelled = flag.name.upper() if flag.positional and flag.required else f"--{flag.name}"
        entry = next(line for line in text.splitlines() if line.startswith(f"  {spelled}"))
        if flag.metavar and not flag.positional:
            assert entry.startswith(f"  {spelled} {flag.metavar}"), entry
    assert "Default: None" not in text


@pytest.mark.parametrize("name", list(KNOWN))
def test_help_of_every_command(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([name, "--help"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    check_help(captured.out, KNOWN[name])
    compact = " ".join(captured.out.split())
    for flag in KNOWN[name].flags:
        if not flag.required and "default" not in flag.help:
            shown = ("yes" if flag.default else "no") if flag.switch else str(flag.default)
            assert f"default: {shown if flag.default is not None else 'none'})" in compact, (flag.name, compact)


@pytest.mark.parametrize("name", list(KNOWN))
def test_no_flag_text_is_cut(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every flag's whole text reaches --help (a docstring line the parser took for a new flag cut it)."""
    for flag in KNOWN[name].flags:
        assert flag.help.count("(") == flag.help.count(")") and flag.help.rstrip().endswith((".", ")")), flag
    assert main([name, "--help"]) == 0
    compact = " ".join(capsys.readouterr().out.split())
    assert all(" ".join(flag.help.split()) in compact for flag in KNOWN[name].flags)


def test_help_shows_real_defaults_and_types(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--vectors TEXT" in text and "(default: none)" in text and "--max_chunk_size INT" in text
    assert main(["search", "-h"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--k INT how many spans (1..10). (default: 10)" in text
    assert "--mode lexical|vector|hybrid" in text and "not comparable" in text


def test_overview_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(f"\n  {name} " in text for name in KNOWN)
    assert "INFO:" not in text and "Any" not in text


# ----------------------------------------------------------------------------- as a user runs it


def test_misspelled_flag_never_publishes_another_tree(project: Path) -> None:
    """The case of the report: ``--vector`` for ``--vectors`` built the other tree over the live index."""
    before = state(project)
    current = (project / "data/processed/CURRENT").read_text()
    ran = run_cli("index", "--repo_path", "other", "--index_dir", "data/processed", "--vector", "none", cwd=project)
    assert ran.code == 2 and ran.out == ""
    assert ran.err.splitlines() == ["fastrag: error: unknown flag --vector for index (did you mean --vectors?)"]
    assert (project / "data/processed/CURRENT").read_text() == current
    assert state(project) == before


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["search", "blueprint", "--kk", "3"], "unknown flag --kk for search (did you mean --k?)"),
        (["index", "--repo_path", "other", "--bogus", "1"], "unknown flag --bogus for index"),
        (["search_dataset", "--dataset_path", DATASET, "--k", "3", "--k", "4"], "--k is given twice"),
    ],
)
def test_bad_command_lines_in_a_process_of_their_own(argv: list[str], line: str, project: Path) -> None:
    before = state(project)
    ran = run_cli(*argv, cwd=project)
    assert ran.code == 2 and ran.out == "", (ran.out, ran.err)
    assert len(ran.err.splitlines()) == 1 and ran.err.startswith("fastrag: error: " + line), ran.err
    assert state(project) == before


def test_help_in_a_process_of_its_own(project: Path) -> None:
    ran = run_cli("index", "--help", cwd=project)
    assert ran.code == 0 and ran.err == ""
    check_help(ran.out, KNOWN["index"], "python -m fastrag")


def script_run(*args: str, cwd: Path) -> CliResult:
    """Run the ``fastrag`` console script of this environment (as after ``pip install``) in ``cwd``."""
    script = Path(sys.executable).parent / "fastrag"
    proc = subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("started", ["fastrag", "python -m fastrag"])
def test_help_and_suggested_commands_name_the_program_as_started(started: str, tmp_path: Path) -> None:
    """``--help`` and every error that suggests a command spell it as the user started fastrag."""
    run = script_run if started == "fastrag" else run_cli
    other = "python -m fastrag" if started == "fastrag" else "`fastrag "
    helped = run("--help", cwd=tmp_path)
    assert helped.code == 0 and helped.out.startswith(f"usage: {started} COMMAND")
    check_help(run("search", "--help", cwd=tmp_path).out, KNOWN["search"], started)
    typo = run("serch", "x", cwd=tmp_path)
    assert typo.code == 2 and f"(see `{started} --help`)" in typo.err, typo.err
    no_index = run("search", "x", "--index_dir", str(tmp_path / "none"), cwd=tmp_path)
    assert no_index.code == 1 and f"run `{started} index` to build it" in no_index.err, no_index.err
    assert other not in helped.out + typo.err + no_index.err


@pytest.mark.parametrize("name", list(KNOWN))
def test_examples_work_in_any_repository(name: str) -> None:
    """No example names the exercise's corpus (vLLM, its LoRA adapters, its classes)."""
    command = KNOWN[name]
    examples = [command.example, *command.description.split("Example:")[1:]]
    exercise = ("search_dataset", "evaluate", "answer_dataset", "evaluate_answers")  # the exercise's own commands
    for text in examples if name not in exercise else ():
        assert not any(word in text.lower() for word in ("vllm", "lora", "llmengine")), (name, text)


# ----------------------------------------------------------------------------- where answer saves


def test_answer_files_follow_the_index_and_are_named_after_the_question(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two questions, two files beside the index; the same question again replaces its own, and says so."""
    elsewhere = project / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    index = str(project / "data/processed")
    first, second = "Which endpoint loads a LoRA adapter?", "How do I install vllm?"
    folder = project / "data/output/search_results_and_answer"
    for question in (first, second, first):
        assert main(["answer", question, "--k", "0", "--index_dir", index]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.endswith("replacing the earlier answer to this question)") for line in err] == [False, False, True]
    assert {p.name for p in folder.iterdir()} >= {answer_file(first), answer_file(second)}
    assert answer_file(first) != answer_file(second) and answer_file(first) == answer_file(f" {first}  ")
    saved = json.loads((folder / answer_file(second)).read_text())
    assert saved["search_results"][0]["question"] == second
    assert not (elsewhere / "data").exists()  # nothing written where the command ran

    assert main(["answer", first, "--k", "0", "--index_dir", index, "--save_directory", "mine"]) == 0
    assert (elsewhere / "mine" / answer_file(first)).is_file()


def test_the_program_is_named_as_it_was_started(monkeypatch: pytest.MonkeyPatch) -> None:
    import fastrag
    from fastrag.errors import program

    ours = str(Path(fastrag.__file__).parent / "__main__.py")
    monkeypatch.setattr(sys, "argv", [ours])
    assert program() == "python -m fastrag"
    # another package's `python -m` (pytest, a user's tool) runs fastrag as a library: its console name
    monkeypatch.setattr(sys, "argv", [str(Path(pytest.__file__).parent / "__main__.py")])
    assert program() == "fastrag"
    monkeypatch.setattr(sys, "argv", [])
    assert program() == "fastrag"
