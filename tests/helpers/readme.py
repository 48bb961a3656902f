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


FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (?P<title>.+)$", re.M)


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: code spans unwrapped, lower case, punctuation
    dropped (word characters, hyphens and spaces stay), spaces turned into hyphens."""
    text = CODE_SPAN.sub(lambda match: match.group(0)[1:-1], title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """The anchors of a Markdown file's headings (a repeated one gets ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCED.sub("", document.read_text(encoding="utf-8"))):
        name = anchor(match["title"])
        found.add(f"{name}-{seen[name]}" if name in seen else name)
        seen[name] = seen.get(name, 0) + 1
    return found


def broken_links(document: Path) -> list[str]:
    """The document's relative links (outside code) whose file is missing, or whose
    ``#anchor`` names no heading of the Markdown file it points to."""
    text = CODE_SPAN.sub("", FENCED.sub("", document.read_text(encoding="utf-8")))
    broken = []
    for match in LINK.finditer(text):
        target = match["target"]
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        destination = document.parent / path if path else document
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target} (no such heading)")
    return broken
