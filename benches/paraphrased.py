"""The paraphrased question sets: the public and dev questions reworded, same ids and ground truth.

Usage: ``python benches/paraphrased.py [--datasets data/datasets] [--out data/datasets/paraphrased]``

``benches/paraphrased.json`` holds, for every question of ``dataset_{docs,code}_{public,dev}.json``,
a rewording that spells no code identifier or file name and copies no three-word run of its
evidence or of the original question. This script writes them as datasets in the exercise's
format, ``<out>/AnsweredQuestions/dataset_<set>_paraphrased.json`` (ground truth and reference
answer of the original) and ``<out>/UnansweredQuestions/...``, so that ``search_dataset`` and
``evaluate`` run on them like on any set. ``benches/cv.py`` scores them with the weights fitted out
of fold on the originals (:func:`paraphrased_questions`); they are never fitted on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import ROOT, write_text_atomic

from fastrag.evaluation.datasets import load_dataset

#: The rewordings, by original set file name, then question id.
PARAPHRASES = ROOT / "benches/paraphrased.json"
#: Suffix of a paraphrased set's file stem.
SUFFIX = "_paraphrased"


def paraphrases(path: Path = PARAPHRASES) -> dict[str, dict[str, str]]:
    """Original set file name -> question id -> its rewording."""
    sets: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))["sets"]
    return sets


def paraphrased_set(original: Path, reworded: dict[str, str]) -> dict[str, list[dict[str, object]]]:
    """The question set in ``original`` with every question replaced by its rewording (same ids, the
    rest of each question as it is). Raises ``KeyError`` naming a question that has no rewording."""
    raw = json.loads(original.read_text(encoding="utf-8"))
    load_dataset(original)  # the original must be a valid question set
    questions = raw["rag_questions"]
    for q in questions:
        q["question"] = reworded[q["question_id"]]
    return {"rag_questions": questions}


def write_paraphrased(datasets: Path, out: Path, path: Path = PARAPHRASES) -> list[Path]:
    """Write the paraphrased copy of every set of ``path`` found under ``datasets``; the files written."""
    written: list[Path] = []
    for name, reworded in paraphrases(path).items():
        for kind in ("AnsweredQuestions", "UnansweredQuestions"):
            original = datasets / kind / name
            if not original.is_file():
                continue
            target = out / kind / f"{Path(name).stem}{SUFFIX}.json"
            if target.resolve() == original.resolve():
                raise ValueError(f"refusing to overwrite the input {original}")
            target.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(target, json.dumps(paraphrased_set(original, reworded), indent=1) + "\n")
            written.append(target)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=ROOT / "data/datasets")
    parser.add_argument("--out", type=Path, default=ROOT / "data/datasets/paraphrased")
    args = parser.parse_args()
    written = write_paraphrased(args.datasets, args.out)
    if not written:
        sys.exit(f"paraphrased: none of the original sets is in {args.datasets}")
    for target in written:
        print(target)


if __name__ == "__main__":
    main()
