"""Report tables pasted into documents, and the check that they are pasted unchanged.

A document holds a report's table between two markers that name the file the report
wrote, relative to the repository root::

    <!-- report:docs/study-results/report/normalised/time_to_target_by_loss.md -->
    | series | none (h = 73.2 s) | ... |
    |---|---|...|
    <!-- /report -->

The lines between the markers must be the file's lines, unchanged (``python -m
gclab.report`` writes ``time_to_target.md`` and ``time_to_target_by_loss.md`` for this).
"""

from __future__ import annotations

import re
from pathlib import Path

OPEN = re.compile(r"^<!-- report:", re.M)  # at a line's start: an indented example is no block
BLOCK = re.compile(r"^<!-- report:(?P<name>\S+) -->\n(?P<body>.*?)^<!-- /report -->$", re.S | re.M)


def report_blocks(text: str) -> dict[str, str]:
    """The document's blocks: the report file each names, and the text between its markers.
    An opening marker without its closing one is an AssertionError."""
    blocks = {match["name"]: match["body"] for match in BLOCK.finditer(text)}
    unclosed = len(OPEN.findall(text)) - len(blocks)
    assert not unclosed, "a report block is not closed by <!-- /report -->"
    return blocks


def assert_blocks_match(document: Path, root: Path) -> int:
    """Assert that every report block of ``document`` equals the report file it names
    (relative to ``root``), naming the first line that differs; returns how many blocks."""
    blocks = report_blocks(document.read_text(encoding="utf-8"))
    for name, body in blocks.items():
        report = root / name
        assert report.is_file(), f"{document.name}: block report:{name} names no file"
        want = report.read_text(encoding="utf-8").splitlines()
        got = body.splitlines()
        for number, (line, expected) in enumerate(zip(got, want), 1):
            assert line == expected, (
                f"{document.name}: block report:{name}, line {number} differs from the report:"
                f"\n  document: {line}\n  report:   {expected}"
            )
        assert len(got) == len(want), (
            f"{document.name}: block report:{name} has {len(got)} lines, the report {len(want)}"
        )
    return len(blocks)
