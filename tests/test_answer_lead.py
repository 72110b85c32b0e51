"""The lead of an answer: whole units of the shown excerpts, ranked against the question. Offline throughout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from fastrag.answering.grounding import answer_prompt, audit_answer, grounded_answer, grounded_prompt
from fastrag.answering.lead import (
    FEATURES,
    WEIGHTS_FILE,
    LeadModel,
    asks,
    candidates,
    choose,
    features,
    lead,
    lead_model,
    render_lead,
)
from fastrag.answering.prompt import EMPTY_ANSWER, Excerpt, Source, SpanReader
from fastrag.errors import UserError
from fastrag.evaluation.answer_metrics import answer_text

DOC = """# Deploying

The stack is installed with a Helm chart. Monitor the deployment status using:

```bash
kubectl get pods -n vllm
```

| flag | default |
|---|---|
| `--max-num-seqs` | 256 |

- Set `VLLM_PORT` to change the port. It is read once.
Next comes a paragraph that is wrapped
over two lines and ends here.

A block cut by the end of the excerpt follows:

```python
x = 1
"""
CODE = '''class EngineArgs:
    """Arguments of the engine."""

    max_num_seqs: int = 256
    block_size: int = field(
        default=16,
    )
'''


def _excerpts(tmp_path: Path, files: dict[str, str]) -> list[Excerpt]:
    excerpts = []
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        excerpts.append(Excerpt(Source(str(tmp_path / name), 0, len(text)), 0, len(text), text))
    return excerpts


def _texts(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    return {u.text: u.kind for u in candidates(_excerpts(tmp_path, files), SpanReader())}


def test_units_are_whole_and_an_introducing_sentence_carries_its_block(tmp_path: Path) -> None:
    found = _texts(tmp_path, {"deploy.md": DOC})
    intro = "Monitor the deployment status using:\n```bash\nkubectl get pods -n vllm\n```"
    assert found[intro] == "intro" and found["The stack is installed with a Helm chart."] == "sentence"
    assert found["| `--max-num-seqs` | 256 |"] == "row"
    assert found["Next comes a paragraph that is wrapped over two lines and ends here."] == "sentence"
    assert found["Set `VLLM_PORT` to change the port."] == "sentence"
    # no bare lead-in, no block cut by the excerpt's end, no table rule
    assert not any(t.endswith(":") for t in found) and not any("x = 1" in t for t in found)
    assert "Monitor the deployment status using:" not in found and not any("---" in t for t in found)


def test_every_unit_cites_exactly_its_characters(tmp_path: Path) -> None:
    units = candidates(_excerpts(tmp_path, {"deploy.md": DOC, "args.py": CODE}), SpanReader())
    for unit in units:
        text = (tmp_path / Path(unit.file_path).name).read_text(encoding="utf-8")
        for part, (first, last) in zip(unit.parts, unit.ranges):
            assert " ".join(text[first:last].split()) == " ".join(part.split())
    shown = render_lead(units)
    assert audit_answer(shown, SpanReader()).support_rate == 1.0


def test_a_statement_of_source_code_is_taken_to_its_closing_bracket(tmp_path: Path) -> None:
    found = _texts(tmp_path, {"args.py": CODE})
    assert found["block_size: int = field(\n    default=16,\n)"] == "code"
    assert found["max_num_seqs: int = 256"] == "code"


def test_the_question_says_what_it_asks_for() -> None:
    assert asks("What is the default value of max_num_seqs?")["value"]
    assert asks("Which version of flash-attn is required?")["version"]
    assert asks("How do I monitor the deployment?")["procedure"]
    assert asks("What command runs the benchmark?")["command"]
    assert not asks("Why is the sky blue?")["command"]


def test_a_default_value_question_on_code_leads_with_the_line_that_sets_it(tmp_path: Path) -> None:
    excerpts = _excerpts(tmp_path, {"args.py": CODE})
    shown = lead("What is the default value of max_num_seqs in EngineArgs?", excerpts, SpanReader())
    assert "max_num_seqs: int = 256" in shown.split("\n\n")[0] and "```" in shown
    assert audit_answer(shown, SpanReader()).support_rate == 1.0


def test_the_budget_bounds_the_lead_beyond_its_best_unit(tmp_path: Path) -> None:
    units = candidates(_excerpts(tmp_path, {"deploy.md": DOC}), SpanReader())
    weights = tuple(1.0 if name == "overlap" else 0.0 for name in FEATURES)
    one = choose("How do I monitor the deployment status?", units, LeadModel(weights, 0))
    assert len(one) == 1 and "kubectl get pods" in one[0].text
    assert choose("Bananas?", units, LeadModel(weights, 40)) == []
    assert len(features("Bananas?", units)[0]) == len(FEATURES)


def test_nothing_matching_says_the_sources_do_not_say(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(DOC, encoding="utf-8")
    prompt = grounded_prompt("Bananas?", [Source(str(tmp_path / "a.md"), 0, len(DOC))], _count, _render, 400)
    assert prompt.lead == ""
    assert grounded_answer("Bananas are yellow.", prompt).answer.startswith(EMPTY_ANSWER)
    # no lead and no key line: nothing to join, so the model is asked nothing and the answer says so
    asked = answer_prompt(prompt, _render, _count)
    assert asked.text == "" and not asked.key_lines
    assert grounded_answer("", asked).answer.startswith(EMPTY_ANSWER)


def test_a_lone_surrogate_in_the_question_is_no_traceback(tmp_path: Path) -> None:
    excerpts = _excerpts(tmp_path, {"deploy.md": DOC})
    assert isinstance(lead("Helm \ud800 chart?", excerpts, SpanReader()), str)
    assert lead("\ud800", excerpts, SpanReader()) == ""


def test_evidence_of_only_code_gets_a_lead_that_passes_the_check(tmp_path: Path) -> None:
    (tmp_path / "args.py").write_text(CODE, encoding="utf-8")
    source = Source(str(tmp_path / "args.py"), 0, len(CODE))
    prompt = grounded_prompt("What is the block_size default?", [source], _count, _render, 400)
    done = grounded_answer("", prompt)
    assert "default=16" in done.lead and not answer_text(done.lead).endswith(":")
    assert audit_answer(done.answer, SpanReader(), "What is the block_size default?").support_rate == 1.0


@pytest.mark.parametrize("content", ["", "{not json", '{"features": ["x"], "weights": [1], "budget": 3}'])
def test_a_missing_or_damaged_weights_file_is_one_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "lead_weights.json"
    if content:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match="lead_weights.json"):
        lead_model(path)


def test_the_shipped_weights_load() -> None:
    data = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    model = lead_model()
    assert data["features"] == list(FEATURES) and len(model.weights) == len(FEATURES) and model.budget >= 0


def test_a_thousand_questions_without_sources_are_answered_without_a_model(indexed: Path) -> None:
    results = {
        "search_results": [
            {"question_id": f"q{i}", "question": f"Question {i}?", "retrieved_sources": []} for i in range(1000)
        ],
        "k": 3,
    }
    path = indexed / "many.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    done = run_cli("answer_dataset", "--student_search_results_path", str(path), cwd=indexed)
    assert done.code == 0, done.err
    saved = json.loads((indexed / "data/output/search_results_and_answer/many.json").read_text(encoding="utf-8"))
    assert len(saved["search_results"]) == 1000 and "Traceback" not in done.err
    assert {a["answer"] for a in saved["search_results"]} == {saved["search_results"][0]["answer"]}


def _count(texts: Any) -> list[int]:
    return [len(t) // 4 + 1 for t in texts]


def _render(msgs: Any) -> str:
    return "\n".join(m["content"] for m in msgs)


def test_site_markup_is_no_unit(tmp_path: Path) -> None:
    doc = '[](){ #nginx-anchor }\n\n--8<-- "docs/cli/json_tip.inc.md"\n\nThe server listens on port 8000.\n'
    assert list(_texts(tmp_path, {"m.md": doc})) == ["The server listens on port 8000."]
