"""The xrepo benchmark's tasks and its scoring rule (``../shared/xrepo/README.md``), with no engine in sight.

A task is one annotated query of one repository; its targets are its ``relevant`` and ``secondary``
entries, each a path in the repository, optionally narrowed to 1-based inclusive lines. A ranked list of
results (:class:`Span`: a path in the repository and 1-based inclusive lines) is scored by NDCG@10:

- a result **covers** a target when its path ends with the target's path or the target's ends with its
  own, on ``/`` boundaries (:func:`path_matches`), and, for a line target, the line ranges overlap;
- each target gets the rank of the first of the first ten results covering it; gains are binary and a
  result first covering two targets gives one gain;
- the ideal DCG is that of ``min(10, number of targets)`` gains: a target no result covers (a file that
  was not indexed) still counts.

Repositories are averaged over their tasks; the headline is the mean over repositories, a language's
figure the mean of its repositories, a category's the mean over its tasks (:func:`summarize`).
Nothing here imports fastrag or semble: both engines' results are scored by these functions.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Results scored per query.
K = 10


@dataclass(frozen=True, slots=True)
class Target:
    """One annotated target: a path in the repository, and its lines (1-based, inclusive) when given."""

    path: str
    start_line: int | None = None
    end_line: int | None = None

    @classmethod
    def parse(cls, raw: str | Mapping[str, Any]) -> Target:
        """A target as the annotations write it: a path, or ``{path, start_line, end_line}``."""
        if isinstance(raw, str):
            return cls(raw)
        start, end = raw.get("start_line"), raw.get("end_line")
        return cls(str(raw["path"]), None if start is None else int(start), None if end is None else int(end))

    @property
    def has_lines(self) -> bool:
        """Whether the target is a line range rather than a whole file."""
        return self.start_line is not None and self.end_line is not None

    def as_json(self) -> dict[str, Any]:
        """The target as a JSON object (lines ``null`` for a file target)."""
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line}


@dataclass(frozen=True, slots=True)
class Span:
    """One result: a path in the repository and its first and last line (1-based, inclusive)."""

    path: str
    first_line: int
    last_line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.first_line}-{self.last_line}"


@dataclass(frozen=True, slots=True)
class Repo:
    """One benchmark repository: its name, language and the folder of its tree that is indexed."""

    name: str
    language: str
    benchmark_root: str | None

    @property
    def root(self) -> str:
        """The indexed folder as a path inside the repository (``""``: the whole tree)."""
        return (self.benchmark_root or "").strip("/")


@dataclass(frozen=True, slots=True)
class Task:
    """One query of one repository and its targets (``relevant`` then ``secondary``)."""

    repo: str
    language: str
    category: str
    query: str
    targets: tuple[Target, ...]


@dataclass(frozen=True, slots=True)
class TaskResult:
    """A task scored: its NDCG@10, each target's rank (``None``: not in the first ten) and the spans ranked."""

    task: Task
    ndcg: float
    ranks: tuple[int | None, ...]
    spans: tuple[Span, ...]

    def as_json(self) -> dict[str, Any]:
        """The per-task record of ``xrepo.py --json``: what cross-validation by repository reads."""
        return {
            "repo": self.task.repo,
            "language": self.task.language,
            "category": self.task.category,
            "query": self.task.query,
            "ndcg": self.ndcg,
            "targets": [t.as_json() for t in self.task.targets],
            "target_ranks": list(self.ranks),
            "top": [str(s) for s in self.spans[:K]],
        }


# --------------------------------------------------------------------------- the rule


def _normal(path: str) -> str:
    """``path`` with ``/`` separators and no leading ``./`` or ``/``."""
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def path_matches(result_path: str, target_path: str) -> bool:
    """Whether one path ends with the other on a ``/`` boundary (``a/b.py`` matches ``x/a/b.py``, not ``xa/b.py``)."""
    a, b = _normal(result_path), _normal(target_path)
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def covers(span: Span, target: Target) -> bool:
    """Whether the result ``span`` covers ``target``: same file (:func:`path_matches`), lines overlapping."""
    if not path_matches(span.path, target.path):
        return False
    if not target.has_lines:
        return True
    assert target.start_line is not None and target.end_line is not None
    return span.first_line <= target.end_line and target.start_line <= span.last_line


def target_ranks(spans: Sequence[Span], task: Task) -> tuple[int | None, ...]:
    """Each target's 1-based rank: that of the first of the first :data:`K` spans covering it, else ``None``."""
    top = spans[:K]
    return tuple(next((i for i, s in enumerate(top, 1) if covers(s, t)), None) for t in task.targets)


def dcg(gains: Iterable[int]) -> float:
    """Discounted cumulative gain: the sum of ``gain_i / log2(i + 1)``, ranks from 1."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains, 1))


def ndcg_from_ranks(ranks: Iterable[int | None], n_targets: int) -> float:
    """NDCG@10 of targets first covered at ``ranks``: binary gains at those ranks over ``min(10, n_targets)`` ones."""
    if n_targets <= 0:
        return 0.0
    gains = [0] * K
    for rank in ranks:
        if rank is not None and 1 <= rank <= K:
            gains[rank - 1] = 1
    return dcg(gains) / dcg([1] * min(K, n_targets))


def ndcg_at_10(ranked_spans: Sequence[Span], task: Task) -> float:
    """NDCG@10 of ``ranked_spans`` (best first) for ``task``, by the benchmark's rule."""
    return ndcg_from_ranks(target_ranks(ranked_spans, task), len(task.targets))


def score(task: Task, ranked_spans: Sequence[Span]) -> TaskResult:
    """``task`` scored on ``ranked_spans``: NDCG@10, the targets' ranks, the first :data:`K` spans."""
    ranks = target_ranks(ranked_spans, task)
    return TaskResult(task, ndcg_from_ranks(ranks, len(task.targets)), ranks, tuple(ranked_spans[:K]))


def char_span_lines(line_starts: Sequence[int], start: int, end: int) -> tuple[int, int]:
    """The 1-based first and last line of the characters ``[start, end)`` of a text whose lines start at
    ``line_starts`` (sorted, ``0`` first); an empty span is the line of ``start``."""
    first = bisect.bisect_right(line_starts, start)
    last = bisect.bisect_right(line_starts, max(start, end - 1))
    return first, last


# --------------------------------------------------------------------------- the benchmark's files


def load_repos(xrepo_dir: Path) -> list[Repo]:
    """The repositories of ``xrepo_dir/repos.json``, in its order."""
    raw = json.loads((xrepo_dir / "repos.json").read_text(encoding="utf-8"))
    return [Repo(r["name"], r["language"], r.get("benchmark_root")) for r in raw]


def load_tasks(xrepo_dir: Path, repos: Sequence[Repo] | None = None) -> list[Task]:
    """The tasks of ``repos`` (default: every repository of ``repos.json``), repository by repository, in
    the annotations' order."""
    chosen = load_repos(xrepo_dir) if repos is None else repos
    tasks: list[Task] = []
    for repo in chosen:
        for item in json.loads((xrepo_dir / "annotations" / f"{repo.name}.json").read_text(encoding="utf-8")):
            targets = tuple(Target.parse(t) for t in [*item.get("relevant", []), *item.get("secondary", [])])
            tasks.append(Task(repo.name, repo.language, str(item.get("category", "")), item["query"], targets))
    return tasks


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True, slots=True)
class Summary:
    """Means of one engine's results: per repository, per language (of its repositories), per category
    (of its tasks), and the headline mean over repositories."""

    repos: dict[str, float]
    languages: dict[str, float]
    categories: dict[str, float]
    mean: float


def summarize(results: Sequence[TaskResult]) -> Summary:
    """The means of ``results`` (keys in first-seen order; languages and categories sorted)."""
    per_repo: dict[str, list[float]] = {}
    language: dict[str, str] = {}
    per_category: dict[str, list[float]] = {}
    for r in results:
        per_repo.setdefault(r.task.repo, []).append(r.ndcg)
        language[r.task.repo] = r.task.language
        per_category.setdefault(r.task.category, []).append(r.ndcg)
    repos = {name: statistics.fmean(v) for name, v in per_repo.items()}
    by_language: dict[str, list[float]] = {}
    for name, value in repos.items():
        by_language.setdefault(language[name], []).append(value)
    return Summary(
        repos,
        {lang: statistics.fmean(v) for lang, v in sorted(by_language.items())},
        {cat: statistics.fmean(v) for cat, v in sorted(per_category.items())},
        statistics.fmean(repos.values()) if repos else float("nan"),
    )
