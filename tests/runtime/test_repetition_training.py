"""Training with ``is_cr`` and ``is_hr`` under ``network.recovery=partial``, end to end.

The workers run in this process (``helpers.inprocess``). A trace makes the chosen workers
late each round; the job then gets the rescaled sum of the partitions of the largest set
of arrived workers with disjoint windows, found here by brute force (each round's set is
unique), and the weights must be single-process SGD on exactly those partitions (the
whole batch in a round whose windows tile), rescaled by ``k / |S|``.
"""

from pathlib import Path

import numpy as np
import pytest

from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.training import assert_same_weights, reference_weights, trained_weights
from helpers.windows import isgc_parts, maximum_sets

#: scheme overrides, (n, c, c1, g), and the workers in time in each round.
CASES = {
    # windows 01 12 23 30: all; {0}; {1, 3} tile; {2}; {3}
    "is_cr": (
        ["scheme=is_cr", "scheme.c=2"],
        (4, 2, 0, 1),
        [[0, 1, 2, 3], [0], [1, 2, 3], [2], [3]],
    ),
    # windows 012 012 123 | 345 345 450: all; {2}; {2, 5} tile across the groups; {0}; {4}
    "is_hr": (
        ["scheme=is_hr", "scheme.c=3", "scheme.c1=1", "scheme.g=2"],
        (6, 3, 1, 2),
        [[0, 1, 2, 3, 4, 5], [2], [2, 5], [0], [4]],
    ),
}


def partial_trace(path: Path, n: int, in_time: list[list[int]]) -> Path:
    """1 s for the workers in time, 50 s for the others (late at μ = 1)."""
    durations = np.full((n, len(in_time)), 50.0)
    for r, workers in enumerate(in_time):
        durations[workers, r] = 1.0
    np.savez(path, durations=durations, load=0.0)
    return path


@pytest.mark.parametrize("name", CASES)
def test_weights_are_sgd_on_the_covered_partitions_rescaled(tmp_path: Path, name: str) -> None:
    overrides, (n, c, c1, g), in_time = CASES[name]
    covered = {}
    for job, workers in enumerate(in_time):
        sets = maximum_sets(n, c, c1, g, workers)
        if len(sets[0]) * c < n:  # the windows do not tile: the set is unique
            (chosen,) = sets
            covered[job] = sorted(p for w in chosen for p in isgc_parts(n, c, c1, g, w))
    assert covered and len(covered) < len(in_time)  # some rounds decode whole, some do not
    trace = partial_trace(tmp_path / "trace.npz", n, in_time)
    cfg = compose_config(
        [*TINY, *overrides, f"cluster.workers={n}", f"train.rounds={len(in_time)}",
         "train.batch_size=48", "delay=trace", f"delay.path={trace}", "delay.slope=0",
         "network.policy=deadline", "network.mu=1", "network.recovery=partial"]
    )  # fmt: skip
    got = trained_weights(cfg, tmp_path / "run", in_process)
    assert_same_weights(got, reference_weights(cfg, covered))
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]
    want = [len(covered.get(job, range(n))) / n for job in range(len(in_time))]
    assert [r["coverage"] for r in rounds] == want
    assert not any(r["waited"] or r["retransmissions"] for r in rounds)
