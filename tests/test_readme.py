"""The README is for the people who install fastrag: short, opening with the two commands, its links alive."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12 * 1024
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in block.splitlines()] == [["make", "run"], ["make", "test"]]


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("#"):
                continue
            assert (page.parent / target.split("#", 1)[0]).exists(), (page.name, target)
