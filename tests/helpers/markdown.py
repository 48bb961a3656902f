"""Reading the Markdown tables that reports write."""

from __future__ import annotations

from pathlib import Path


def markdown_rows(path: Path) -> list[dict[str, str]]:
    """The rows of every Markdown table in the file, keyed by their table's header."""
    rows, header = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if header is None:
            header = cells
        elif not line.startswith("|---"):
            rows.append(dict(zip(header, cells)))
    return rows
