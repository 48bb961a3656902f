"""The documents' relative links resolve, and the README stays a short entry page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gclab import CONF_DIR
from helpers.readme import anchor, anchors, broken_links

REPO = CONF_DIR.parents[1]
DOCUMENTS = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_relative_link_names_a_file_and_heading_that_exist(document):
    assert not broken_links(document), f"{document.name}: broken links {broken_links(document)}"


def test_the_readme_is_short_and_links_to_the_runtime_guide():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is the entry page: depth goes to docs/"
    assert "](docs/runtime.md)" in text


def test_the_readme_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^python -m pytest -q +# everything", readme, re.M)
    assert re.search(r"^python3 -m pytest -q$", ci, re.M)


def test_anchors_follow_github(tmp_path: Path):
    assert anchor("The scheme contract (`gclab/coding/base.py`)") == (
        "the-scheme-contract-gclabcodingbasepy"
    )
    assert anchor("The first machine's points") == "the-first-machines-points"
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"a", "notes", "notes-1"}
    (tmp_path / "other.md").write_text(
        "[ok](page.md#notes-1) [gone](missing.md) [bad](page.md#none) `[code](x.md)` "
        "[web](https://example.org/x)\n"
    )
    assert broken_links(tmp_path / "other.md") == [
        "missing.md (no such file)",
        "page.md#none (no such heading)",
    ]
