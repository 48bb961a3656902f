"""``network.recovery=wait_all`` reproduces the SGC papers' simulator on the shared traces.

``../shared/traces/PUBLIC_SIMULATOR.md`` lists what the public simulator
(mamaj/Sequential-Gradient-Coding-2, ``2_find_runtimes/``) printed on the load-0 traces:
every row (uncoded, SR-SGC, M-SGC, GC with the correct tolerance; both slopes, both
traces) must come out of gclab's engine to a relative 1e-9. ``waits`` agree too, except
for uncoded: their ``no_coding.py`` counts every round as a wait, gclab only the rounds
with a straggler to wait for (a round whose packets all beat the deadline closes on time).
"""

from __future__ import annotations

import pytest

from gclab.network import NetworkConfig
from gclab.sim import public
from gclab.sim.engine import simulate
from helpers.config import SHARED

TABLE = SHARED / "traces" / "PUBLIC_SIMULATOR.md"
ROWS = public.rows(TABLE) if TABLE.is_file() else []

pytestmark = [
    pytest.mark.slow,
    pytest.mark.no_ray,  # the simulator in this process
    pytest.mark.shared,
    pytest.mark.skipif(not TABLE.is_file(), reason=f"shared reference table {TABLE} is absent"),
]


def test_the_table_has_every_scheme_slope_and_trace() -> None:
    assert len(ROWS) == 108
    assert {row.scheme for row in ROWS} == set(public.SCHEMES)
    assert {(row.trace.name, row.slope) for row in ROWS} == {
        (f"lambda-{name}-load000.npz", slope)
        for name in ("tokyo-cnn-w256-r10", "sydney-cnn-w256-r20")
        for slope in (2.2, 0.31)
    }


@pytest.mark.parametrize(
    "row", ROWS, ids=[f"{r.trace.name.split('-')[1]}-{r.slope}-{r.scheme}-{r.params}" for r in ROWS]
)
def test_wait_all_reproduces_the_public_simulator(row: public.Row) -> None:
    network = NetworkConfig(mu=1.0, recovery="wait_all")
    result = simulate(row.build(), row.delay(), network, row.jobs, seed=0)
    assert result.total_time == pytest.approx(row.total, rel=1e-9, abs=0)
    if row.scheme == "uncoded":  # theirs: every round; gclab: the rounds with a straggler
        assert result.waits <= row.waits == row.jobs
        assert result.waits == int((result.late > 0).sum())
    else:
        assert result.waits == row.waits
