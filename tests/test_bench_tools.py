"""The bench tooling of ``benches/`` (report, scaling corpus, plots): what ``make bench`` relies on.

No timing is asserted here (timings live in ``benches/``); these tests check the machinery: the
deterministic corpus perturbation, the log-log fit, section replacement in RESULTS.md, the criterion
reader, the measured subprocess and the plots drawn from saved figures.
"""

from __future__ import annotations

import ast
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHES = Path(__file__).resolve().parents[1] / "benches"
if str(BENCHES) not in sys.path:
    sys.path.append(str(BENCHES))  # the bench scripts import each other by module name
plots = importlib.import_module("plots")
report = importlib.import_module("report")
scaling = importlib.import_module("scaling")

PY_SOURCE = '''"""Module."""
from __future__ import annotations

import os

MAX_BATCH_SIZE = 8


class FusedMoEConfig:
    def load_lora_adapter(self, adapter_path: str) -> dict[str, str]:
        if adapter_path is None:
            raise ValueError(f"bad {adapter_path!r}")
        for index, value in enumerate(range(MAX_BATCH_SIZE)):
            print(index, value, len(os.environ))
        return {"path": adapter_path}

    def __init__(self) -> None:
        self.hidden_size = 4096
'''


# --------------------------------------------------------------------------- corpus perturbation


def test_respell_keeps_length_shape_and_case() -> None:
    for name in ["load_lora_adapter", "FusedMoEConfig", "MAX_BATCH_SIZE", "forward", "x86_64_arch", "getValue2"]:
        new = scaling.respell(name, bytes(range(40, 72)))
        assert new != name
        assert len(new) == len(name)
        for a, b in zip(name, new):
            assert a.isalpha() == b.isalpha()
            if a.isalpha():
                assert a.isupper() == b.isupper()
            else:
                assert a == b  # digits and underscores stay in place


def test_respell_changes_only_the_last_long_part() -> None:
    new = scaling.respell("load_lora_adapter", bytes(32))
    assert new.startswith("load_lora_") and new != "load_lora_adapter"


def test_renamer_is_deterministic_and_consistent() -> None:
    a, b = scaling.Renamer(3, 0.5), scaling.Renamer(3, 0.5)
    text = "load_lora_adapter(x); load_lora_adapter(y); FusedMoEConfig"
    assert a.text(text, code=True) == b.text(text, code=True)
    out = a.text(text, code=True)
    renamed = a.rename("load_lora_adapter", True)
    assert out.count(renamed) == 2  # the same name is renamed the same way everywhere


def test_renamer_copy_zero_is_the_original_and_fraction_zero_renames_nothing() -> None:
    assert scaling.Renamer(0, 1.0).text(PY_SOURCE, code=True) == PY_SOURCE
    assert scaling.Renamer(5, 0.0).text(PY_SOURCE, code=True) == PY_SOURCE


def test_renamer_keeps_python_parseable_and_protected_names() -> None:
    new = scaling.Renamer(2, 1.0).text(PY_SOURCE, code=True)
    assert new != PY_SOURCE
    ast.parse(new)
    for kept in ("class ", "def ", "return ", "raise ValueError", "enumerate(", "print(", "__init__", "annotations"):
        assert kept in new
    assert "load_lora_adapter" not in new and "hidden_size" not in new


def test_renamer_in_prose_only_touches_identifier_like_names() -> None:
    prose = "Call load_lora_adapter before serving the model with FusedMoEConfig."
    new = scaling.Renamer(4, 1.0).text(prose, code=False)
    assert "serving the model" in new and "Call " in new
    assert "load_lora_adapter" not in new and "FusedMoEConfig" not in new


def test_renamer_paths_keep_prefix_suffix_and_special_names() -> None:
    r = scaling.Renamer(1, 1.0)
    path = r.path("vllm/model_executor/fused_moe/layer.py")
    assert path.startswith("copy1/") and path.endswith(".py") and path.count("/") == 4
    assert path != "copy1/vllm/model_executor/fused_moe/layer.py"
    assert len(path) == len("copy1/vllm/model_executor/fused_moe/layer.py")
    assert r.path("csrc/CMakeLists.txt").endswith("/CMakeLists.txt")
    assert scaling.Renamer(0, 1.0).path("a/b_c.md") == "copy0/a/b_c.md"


# --------------------------------------------------------------------------- report helpers


def test_fit_exponent_recovers_power_laws() -> None:
    xs = [1.0, 2.0, 4.0, 8.0]
    assert report.fit_exponent(xs, [3 * x for x in xs]) == pytest.approx(1.0)
    assert report.fit_exponent(xs, [5 * x**0.5 for x in xs]) == pytest.approx(0.5)
    assert report.fit_exponent(xs, [7.0] * 4) == pytest.approx(0.0)
    assert math.isnan(report.fit_exponent([2.0, 2.0], [1.0, 3.0]))  # one distinct x: no slope


def test_replace_section_keeps_other_sections_and_permissions(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmarks\n\nintro\n\n## A\n\nold a\n\n## B\n\nhand-written b\n")
    os.chmod(path, 0o640)
    report.replace_section(path, "## A", "## A\n\nnew a\n")
    text = path.read_text()
    assert "new a" in text and "old a" not in text and "hand-written b" in text and "intro" in text
    assert text.index("## A") < text.index("## B")
    assert path.stat().st_mode & 0o777 == 0o640
    report.replace_section(path, "## C", "## C\n\nc\n")
    assert path.read_text().rstrip().endswith("c") and "hand-written b" in path.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name != "RESULTS.md"]  # no temporary file left


def _criterion_bench(root: Path, group: str, name: str, median_ns: float, throughput: Any = None) -> None:
    folder = root / group / name / "new"
    folder.mkdir(parents=True)
    info = {"group_id": group, "function_id": name, "throughput": throughput}
    (folder / "benchmark.json").write_text(json.dumps(info))
    ci = {"lower_bound": median_ns * 0.9, "upper_bound": median_ns * 1.1, "confidence_level": 0.95}
    median = {"point_estimate": median_ns, "confidence_interval": ci}
    (folder / "estimates.json").write_text(json.dumps({"median": median}))


def test_read_criterion_and_pairs(tmp_path: Path) -> None:
    _criterion_bench(tmp_path, "search", "batch, 1 thread", 40e6)
    _criterion_bench(tmp_path, "search", "batch, 2 threads", 20e6)
    _criterion_bench(tmp_path, "search", "k=10, exhaustive", 90e3)
    _criterion_bench(tmp_path, "search", "k=10, pruned", 30e3)
    _criterion_bench(tmp_path, "tokenize", "corpus", 400e6, {"Bytes": 20 * 2**20})
    _criterion_bench(tmp_path, "tokenize", "corpus, no stemming", 300e6, {"Bytes": 20 * 2**20})
    results = report.read_criterion(0.0, tmp_path)
    assert {(r.group, r.name) for r in results} >= {("search", "batch, 2 threads"), ("tokenize", "corpus")}
    assert report.read_criterion(os.path.getmtime(tmp_path) + 3600, tmp_path) == []  # older than the run
    pairs = "\n".join(report.criterion_pairs(results))
    assert "1 thread 40 ms vs 2 threads 20 ms = **2.00×**" in pairs
    assert "exhaustive 90 µs vs pruned 30 µs = **3.00×**" in pairs
    assert "with stemming 400 ms vs no stemming 300 ms = **1.33×**" in pairs
    section = report.criterion_section(results, 0.0)
    assert section.startswith(report.CRITERION_SECTION) and "50 MiB/s" in section


def test_run_measured_reports_the_child_peak_rss() -> None:
    code = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('ok')"
    run = report.run_measured([sys.executable, "-c", code])
    assert run.returncode == 0 and run.stdout.strip() == "ok"
    assert run.peak_mb >= 300
    failed = report.run_measured([sys.executable, "-c", "import sys; sys.exit('boom')"])
    assert failed.returncode == 1 and "boom" in failed.stderr


def test_report_step_records_status_and_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "FIGURES_DIR", tmp_path)
    monkeypatch.setattr(report, "RUN_LOG", tmp_path / "run.json")
    report.start()
    assert report.step("ok", [sys.executable, "-c", "pass"]) == 0
    assert report.step("bad", [sys.executable, "-c", "raise SystemExit(3)"]) == 3
    log = json.loads((tmp_path / "run.json").read_text())
    assert [(s["name"], s["status"]) for s in log["steps"]] == [("ok", 0), ("bad", 3)]
    section = report.run_section(log, 100.0, 0)
    assert "FAIL" in section and "failed steps: bad" in section


# --------------------------------------------------------------------------- plots


def _figures() -> dict[str, dict[str, Any]]:
    factors = ["1", "2", "4", "8"]
    engines = ("fastrag", "bm25s", "tantivy")
    sizes = {f: {"tokens": 6e6 * int(f), "chunks": 30000 * int(f), "terms": 60000 * int(f) ** 0.6} for f in factors}
    builds = {
        e: {f: {"build_s": i + int(f), "size_bytes": 2e7 * int(f), "peak_mb": 100.0 * int(f)} for f in factors}
        for i, e in enumerate(engines)
    }
    lat = {e: {f: 40.0 * (i + 1) * int(f) ** 0.7 for f in factors} for i, e in enumerate(engines)}
    exps = {e: {"build": 1.0, "p50": 0.7, "p99": 0.7} for e in engines}
    exps["fastrag index"] = {"wall": 1.0}
    scaling_fig = {
        "sizes": sizes,
        "builds": builds,
        "index": {f: {"wall_s": 8.0 * int(f), "index_bytes": 2.5e7 * int(f), "peak_mb": 150.0 * int(f)} for f in "18"},
        "latency": {"queries": 200},
        "summary": {"p50_us": lat, "p99_us": {e: {f: 5 * v for f, v in d.items()} for e, d in lat.items()},
                    "exponents": exps},
    }  # fmt: skip
    curve = {str(k): min(1.0, 0.5 + k / 20) for k in range(1, 11)}
    modes = {"recall": {m: {"docs": curve, "code": curve} for m in ("lexical", "vector", "hybrid")}}
    threads = {"times_s": {"chunking": {"1": [6.0, 7.0], "2": [4.0, 4.5]}}, "foreign_cores": 0.3}
    languages = {"go": {"repos": 2, "fastrag": 0.6, "semble": 0.9, "published": 0.91},
                 "ruby": {"repos": 1, "fastrag": 0.0, "semble": 0.88, "published": None}}  # fmt: skip
    xrepo = {"languages": languages, "repos": [{}, {}, {}], "mean": {"fastrag": 0.4, "semble": 0.89}}
    return {"scaling": scaling_fig, "modes": modes, "threads": threads, "xrepo": xrepo}


def test_plots_draw_every_png_from_saved_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, figures = tmp_path / "png", tmp_path / "figures"
    out.mkdir()
    monkeypatch.setattr(plots, "OUT_DIR", out)
    monkeypatch.setattr(report, "FIGURES_DIR", figures)
    assert plots.main() == 1  # nothing saved yet
    for name, payload in _figures().items():
        report.save_figures(name, payload)
    assert plots.main() == 0
    written = sorted(p.name for p in out.iterdir())
    expected = ["recall_modes.png", "scaling_build.png", "scaling_latency.png", "scaling_memory.png", "threads.png",
                "xrepo_languages.png"]  # fmt: skip
    assert written == expected
    for name in written:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_paraphrased_sets_keep_ids_and_truth_and_never_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paraphrased = importlib.import_module("paraphrased")
    source = {"file_path": "repo/a.md", "first_character_index": 0, "last_character_index": 5}
    original = {
        "rag_questions": [
            {"question_id": "q1", "question": "What is FP8_MAX?", "sources": [source], "answer": "448"},
            {"question_id": "q2", "question": "Where is install.md?", "sources": [source], "answer": "here"},
        ]
    }
    datasets = tmp_path / "datasets"
    for kind in ("AnsweredQuestions", "UnansweredQuestions"):
        (datasets / kind).mkdir(parents=True)
        questions = original["rag_questions"]
        if kind == "UnansweredQuestions":
            questions = [{"question_id": q["question_id"], "question": q["question"]} for q in questions]
        (datasets / kind / "dataset_docs_public.json").write_text(json.dumps({"rag_questions": questions}))
    rewordings = tmp_path / "paraphrased.json"
    sets = {"dataset_docs_public.json": {"q1": "largest 8-bit float?", "q2": "how to set it up?"}}
    rewordings.write_text(json.dumps({"about": "test", "sets": sets}))

    written = paraphrased.write_paraphrased(datasets, tmp_path / "out", rewordings)
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == [
        "AnsweredQuestions/dataset_docs_public_paraphrased.json",
        "UnansweredQuestions/dataset_docs_public_paraphrased.json",
    ]
    answered = json.loads(written[0].read_text())["rag_questions"]
    assert [q["question"] for q in answered] == ["largest 8-bit float?", "how to set it up?"]
    assert [(q["question_id"], q["sources"], q["answer"]) for q in answered] == [
        (q["question_id"], q["sources"], q["answer"]) for q in original["rag_questions"]
    ]
    # a question without a rewording is an error, not a silent copy of the original
    rewordings.write_text(json.dumps({"sets": {"dataset_docs_public.json": {"q1": "only one"}}}))
    with pytest.raises(KeyError):
        paraphrased.write_paraphrased(datasets, tmp_path / "out2", rewordings)
    # writing into the originals' own folder under the same name is refused
    rewordings.write_text(json.dumps({"sets": {"dataset_docs_public.json": sets["dataset_docs_public.json"]}}))
    monkeypatch.setattr(paraphrased, "SUFFIX", "")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        paraphrased.write_paraphrased(datasets, datasets, rewordings)
    assert json.loads((datasets / "AnsweredQuestions/dataset_docs_public.json").read_text()) == original


def test_the_shipped_rewordings_cover_the_sets_they_name() -> None:
    paraphrased = importlib.import_module("paraphrased")
    sets = paraphrased.paraphrases()
    assert sorted(sets) == [f"dataset_{k}_{s}.json" for k in ("code", "docs") for s in ("dev", "public")]
    assert all(text.strip() and "`" not in text for reworded in sets.values() for text in reworded.values())


def test_the_typed_forms_cross_validation_trains_on_are_what_they_claim() -> None:
    """The benchmark's queries put as questions are read as direct questions (the ranker's ``asks`` trait),
    the vLLM questions typed as keywords are not, and neither form keeps the words it is built around out."""
    from fastrag.retrieval.evidence import asks_directly

    cv_repos = importlib.import_module("cv_repos")
    for query in ("cookie storage and persistence", "how zls traverses the Zig AST", "HTTPAdapter"):
        for form in (*cv_repos.ASKED_FORMS, *cv_repos.UNSEEN_FORMS):
            asked = cv_repos.asked_form(query, form)
            assert asks_directly(asked), asked
            assert query.split()[-1] in asked and "how how" not in asked.lower(), asked
    assert (
        cv_repos.asked_form("how zls traverses the AST", "How does {} work?")
        == "Can you explain how zls traverses the AST?"
    )
    typed = cv_repos.keyword_form("How do I load a LoRA adapter dynamically in vLLM?")
    assert typed == "load LoRA adapter dynamically vLLM" and not asks_directly(typed)
    assert not set(cv_repos.ASKED_FORMS) & set(cv_repos.UNSEEN_FORMS)


def test_draws_of_the_folds_deal_every_repository_and_question_and_bags_keep_forms_with_their_source() -> None:
    """A draw deals repositories and questions evenly over the folds, draw 0's repositories as ``cv_repos.py``
    deals them and another draw otherwise; a bag's subsample holds only training repositories and questions, the
    share asked of them, each keyword form beside its question and each question form beside its repository."""
    from types import SimpleNamespace

    import numpy as np

    cv_repos = importlib.import_module("cv_repos")
    cv_seeds = importlib.import_module("cv_seeds")
    names = [f"repo{i}" for i in range(41)]
    repo_fold, question_fold = cv_seeds.draw(names, 500, 0)
    assert repo_fold == cv_repos.repo_folds(names, cv_seeds.FOLDS)
    assert sorted(np.bincount(list(repo_fold.values())).tolist()) == [8, 8, 8, 8, 9]
    assert np.bincount(question_fold).tolist() == [100] * 5
    assert cv_seeds.draw(names, 500, 1)[0] != repo_fold
    tasks = [SimpleNamespace(task=SimpleNamespace(repo=name)) for name in names for _ in range(2)]
    pooled = cv_repos.Pooled(
        list(range(500)),
        tasks,
        question_fold,
        np.array([repo_fold[t.task.repo] for t in tasks]),
        repo_fold,
        {},
        None,
        keywords=[-q for q in range(500)],
        asked=tasks[::2],
    )
    sub = cv_seeds.subsample(pooled, 3, 0.5, np.random.default_rng(7))
    kept = {t.task.repo for t in sub.tasks}
    training = [name for name in names if repo_fold[name] != 3]
    assert kept <= set(training) and len(kept) == round(0.5 * len(training))
    assert len(sub.questions) == 200 and all(question_fold[q] != 3 for q in sub.questions)
    assert sub.keywords == [-q for q in sub.questions] and sub.question_fold.tolist() == [
        question_fold[q] for q in sub.questions
    ]
    assert {t.task.repo for t in sub.asked} == kept and sub.task_fold.tolist() == [
        repo_fold[t.task.repo] for t in sub.tasks
    ]
