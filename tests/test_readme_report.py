"""The documents' report tables are the committed report files, pasted unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from gclab import CONF_DIR
from helpers.readme import assert_blocks_match, report_blocks

REPO = CONF_DIR.parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TABLE = "| series | none |\n|---|---|\n| uncoded | 22.3 (20.6–24.1) |\n"


def test_every_report_block_of_the_documents_is_the_committed_report():
    checked = sum(assert_blocks_match(document, REPO) for document in DOCUMENTS)
    if not checked:
        pytest.skip("no document holds a <!-- report:FILE --> block yet")


def document(tmp_path: Path, body: str, name: str = "report/by_loss.md") -> Path:
    path = tmp_path / "README.md"
    path.write_text(f"# Results\n\n<!-- report:{name} -->\n{body}<!-- /report -->\n\nText.\n")
    return path


def test_a_block_equal_to_its_report_passes_and_one_that_differs_fails(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "by_loss.md").write_text(TABLE)
    assert assert_blocks_match(document(tmp_path, TABLE), tmp_path) == 1
    edited = TABLE.replace("22.3", "**22.3**")  # a bold cell set by hand
    with pytest.raises(AssertionError, match=r"line 3 differs from the report"):
        assert_blocks_match(document(tmp_path, edited), tmp_path)
    with pytest.raises(AssertionError, match="has 2 lines, the report 3"):
        assert_blocks_match(document(tmp_path, TABLE.rsplit("|\n", 2)[0] + "|\n"), tmp_path)
    with pytest.raises(AssertionError, match="names no file"):
        assert_blocks_match(document(tmp_path, TABLE, "report/missing.md"), tmp_path)


def test_an_unclosed_block_fails():
    with pytest.raises(AssertionError, match="not closed"):
        report_blocks("<!-- report:x.md -->\n| a |\n")
    assert report_blocks("no blocks here") == {}
