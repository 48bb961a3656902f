"""``network.recovery=wait_all`` reproduces the SGC papers' simulator on the shared traces.

``../shared/traces/PUBLIC_SIMULATOR.md`` lists what the public simulator
(mamaj/Sequential-Gradient-Coding-2, ``2_find_runtimes/``) printed on the load-0 traces:
every row (uncoded, SR-SGC, M-SGC, GC with the correct tolerance; both slopes, both
traces) must come out of gclab's engine to a relative 1e-9. ``waits`` agree too, except
for uncoded: their ``no_coding.py`` counts every round as a wait, gclab only the rounds
with a straggler to wait for (a round whose packets all beat the deadline closes on time).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.sgc import MSGC, SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import simulate
from helpers.config import SHARED

TABLE = SHARED / "traces" / "PUBLIC_SIMULATOR.md"
SCHEMES = {
    "uncoded": Uncoded,
    "classic_cr": ClassicCR,
    "classic_fr": ClassicFR,
    "sr_sgc": SRSGC,
    "m_sgc": MSGC,
}

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not TABLE.is_file(), reason=f"shared reference table {TABLE} is absent"),
]


def reference_rows(path: Path) -> list[tuple[str, int, float, str, dict[str, int], float, int]]:
    """``(trace file, jobs, slope, scheme, params, total, waits)`` per row of the table."""
    rows, trace, jobs = [], "", 0
    for line in path.read_text(encoding="utf-8").splitlines():
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
        slope, name, total, waits = float(cells[0]), cells[1].split()[0], cells[4], cells[5]
        rows.append((trace, jobs, slope, name, params, float(total), int(waits)))
    return rows


ROWS = reference_rows(TABLE) if TABLE.is_file() else []


def test_the_table_has_every_scheme_slope_and_trace() -> None:
    assert len(ROWS) == 108
    assert {row[3] for row in ROWS} == set(SCHEMES)
    assert {(row[0], row[2]) for row in ROWS} == {
        (f"lambda-{name}-load000.npz", slope)
        for name in ("tokyo-cnn-w256-r10", "sydney-cnn-w256-r20")
        for slope in (2.2, 0.31)
    }


@pytest.mark.parametrize(
    "row", ROWS, ids=[f"{r[0].split('-')[1]}-{r[2]}-{r[3]}-{r[4]}" for r in ROWS]
)
def test_wait_all_reproduces_the_public_simulator(row) -> None:
    trace, jobs, slope, name, params, total, waits = row
    scheme = SCHEMES[name](256, **params)
    delay = Trace(str(TABLE.parent / trace), slope=slope, base_load=0.0)
    result = simulate(scheme, delay, NetworkConfig(mu=1.0, recovery="wait_all"), jobs, seed=0)
    assert result.total_time == pytest.approx(total, rel=1e-9, abs=0)
    if name == "uncoded":  # theirs: every round; gclab: the rounds with a straggler
        assert result.waits <= waits == jobs and result.waits == int((result.late > 0).sum())
    else:
        assert result.waits == waits
