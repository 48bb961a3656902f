"""The SGC papers' public simulator as a reference: its totals on the shared traces.

``PUBLIC_SIMULATOR.md`` beside the shared traces (``paths.trace_dir``, by default
``../shared/traces``) lists what mamaj/Sequential-Gradient-Coding-2
(``2_find_runtimes/``) printed on the load-0 Lambda traces, with how it was run (base
load 0, μ = 1, jobs = rounds − 4), and the time of its full parameter search. This module
reads that file, so that tests and benchmarks compare gclab with it
(``network.recovery=wait_all`` reproduces every row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.contract import Scheme
from gclab.coding.m_sgc import MSGC
from gclab.coding.sr_sgc import SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.network.trace import Trace

#: Scheme class of each table row's scheme name.
SCHEMES: dict[str, type[Scheme]] = {
    "uncoded": Uncoded,
    "classic_cr": ClassicCR,
    "classic_fr": ClassicFR,
    "sr_sgc": SRSGC,
    "m_sgc": MSGC,
}


@dataclass(frozen=True)
class Row:
    """One total of the public simulator: a setting on a trace and what it printed."""

    trace: Path
    jobs: int
    slope: float
    scheme: str
    params: dict[str, int]
    total: float
    waits: int

    def build(self, n: int = 256) -> Scheme:
        return SCHEMES[self.scheme](n, **self.params)

    def delay(self) -> Trace:
        """The trace as they replayed it: ``durations + L·slope`` (base load 0)."""
        return Trace(str(self.trace), slope=self.slope, base_load=0.0)


def rows(table: Path) -> list[Row]:
    """Every total of ``PUBLIC_SIMULATOR.md``, in the file's order."""
    out, trace, jobs = [], "", 0
    for line in table.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"### `(.+\.npz)`, (\d+) jobs", line)
        if heading:
            trace, jobs = heading.group(1), int(heading.group(2))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not trace or len(cells) != 6 or not re.fullmatch(r"[\d.]+", cells[0]):
            continue
        params = {
            ("lam" if key == "λ" else key): int(value)
            for key, value in re.findall(r"(\w+|λ)=(\d+)", cells[2])
        }
        scheme, total, waits = cells[1].split()[0], float(cells[4]), int(cells[5])
        out.append(Row(table.parent / trace, jobs, float(cells[0]), scheme, params, total, waits))
    return out


def search_seconds(table: Path) -> float | None:
    """Their full parameter search's time (the ``all`` row), seconds; ``None`` if absent."""
    if not table.is_file():
        return None
    found = re.search(r"^\| all \| \d+ \| ([\d.]+) \|", table.read_text(), re.MULTILINE)
    return float(found.group(1)) if found else None


def search_best(table: Path) -> dict[str, tuple[str, float]]:
    """Their search's best setting and total per scheme, as the file words them."""
    if not table.is_file():
        return {}
    best = {}
    for name, cell in re.findall(r"^\| ([^|]+?) \| \d+ \| [\d.]+ \| ([^|]+?) \|", table.read_text(),
                                 re.MULTILINE):  # fmt: skip
        setting, _, total = cell.rpartition(":")
        if total.strip():
            best[name] = (setting.strip(), float(total))
    return best
