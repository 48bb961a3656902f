"""``network.recovery=wait_all`` on a small generated trace, against the rules written out.

:func:`papers_rule` restates docs/simulator.md's ``wait_all`` rules as plain loops (the
stragglers of a round are the packets later than (1+μ)·fastest; an admitted round lasts
min((1+μ)·fastest, slowest), a rejected one the slowest and counts a wait; SR-SGC skips
drain rounds whose job is decodable; M-SGC and the codes with one job per round run every
round), with each scheme's straggler model written independently of gclab's classes. The
engine must give the same duration in every round, for every scheme in :data:`SETTINGS`
(which must name every built-in scheme) and a spread of parameters.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gclab.coding.classic import ClassicCR
from gclab.coding.contract import SCHEMES
from gclab.coding.m_sgc import MSGC
from gclab.coding.sr_sgc import SRSGC
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import simulate
from helpers.coding import every_scheme
from helpers.windows import largest, mask

N, ROUNDS, JOBS, SLOPE, MU = 8, 14, 10, 2.0, 1.0


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1 s + Exp(0.3 s) per worker and round; one packet in six takes 3 s more."""
    rng = np.random.default_rng(12)
    durations = 1.0 + rng.exponential(0.3, (N, ROUNDS)) + 3.0 * (rng.random((N, ROUNDS)) < 1 / 6)
    path = tmp_path_factory.mktemp("trace") / "generated.npz"
    np.savez(path, durations=durations, load=0.0)
    return path


def stragglers(delays: np.ndarray) -> np.ndarray:
    return delays > (1 + MU) * delays.min()


def bursty(marks: dict[int, np.ndarray], late: np.ndarray, r: int, B: int, W: int, lam: int):
    """The papers' per-round check: ≤ λ distinct stragglers over rounds r−W+1..r, and no
    worker straggling now that straggled in rounds r−W+1..r−B (marks: earlier rounds)."""
    recent = np.zeros(N, dtype=bool)
    older = np.zeros(N, dtype=bool)
    for q in range(max(0, r + 1 - W), r):
        recent |= marks.get(q, False)
        if q <= r - B:
            older |= marks.get(q, False)
    return (recent | late).sum() <= lam and not (older & late).any()


def papers_rule(delays: np.ndarray, name: str, p: dict[str, int]) -> tuple[list[float], int]:
    """Round durations (rounds that run) and waits under the papers' wait-for-all rule."""
    if name not in ("sr_sgc", "m_sgc"):  # one job per round: GC, CCE, uncoded, ignore
        s, m = p.get("s", 0), p.get("m", 1)

        def admits(late: np.ndarray) -> bool:
            if name.endswith("_fr"):  # every group of s + m keeps m members
                return bool(((~late).reshape(-1, s + m).sum(axis=1) >= m).all())
            if name.startswith("is_"):  # the windows in time tile the N partitions
                c, c1, g = p["c"], p.get("c1", 0), p.get("g", 1)
                return bool(largest(N, c, c1, g)[mask(np.flatnonzero(~late))] * c == N)
            return int(late.sum()) <= s

        out, waits = [], 0
        for r in range(JOBS):
            d = delays[:, r]
            if admits(stragglers(d)):
                out.append(min((1 + MU) * d.min(), d.max()))
            else:
                out.append(d.max())
                waits += 1
        return out, waits
    B, W, lam = p["B"], p["W"], p["lam"]
    if name == "m_sgc":
        marks, out, waits = {}, [], 0
        for r in range(JOBS + W - 2 + B):
            d, late = delays[:, r], stragglers(delays[:, r])
            if bursty(marks, late, r, B, W, lam):
                marks[r] = late
                out.append(min((1 + MU) * d.min(), d.max()))
            else:
                out.append(d.max())
                waits += 1
        return out, waits
    s = math.ceil(B * lam / (W - 1 + B))  # SR-SGC
    plan, results, marks, out, waits = {}, {}, {}, [], 0
    for r in range(JOBS + B):
        job = r - B
        done = job >= 0 and len(results.get(job, ())) >= N - s
        if r >= JOBS and done:
            continue  # drain round whose job is decodable: not run
        jobs = np.full(N, r)
        if job >= 0 and not done:  # repeaters: never computed the job first, then lowest id
            idle = [w for w in range(N) if plan[job][w] != job]
            lost = [w for w in range(N) if plan[job][w] == job and w not in results.get(job, ())]
            jobs[(idle + lost)[: len(idle) + len(lost) - s]] = job
        plan[r] = jobs
        d, late = delays[:, r], stragglers(delays[:, r])
        if bursty(marks, late, r, B, W, lam):
            out.append(min((1 + MU) * d.min(), d.max()))
            exempt = np.all(late | (jobs == r)) and late.sum() <= s  # the public exemption
            marks[r] = np.zeros(N, dtype=bool) if exempt else late
            kept = ~late
        else:
            out.append(d.max())
            waits += 1
            kept = np.ones(N, dtype=bool)
        for w in np.flatnonzero(kept):
            results.setdefault(int(jobs[w]), set()).add(int(w))
    return out, waits


#: Parameter settings per built-in scheme. The codes across time have none: the papers'
#: wait-for-all rule is for codes with one job per round and SGC; their straggler model (the
#: exact predicate of each job's window) is tested in tests/coding/test_pipelined.py.
SETTINGS = every_scheme(
    {
        "uncoded": [{}],
        "ignore_stragglers": [{"s": s} for s in (1, 3)],
        "classic_cr": [{"s": s} for s in (1, 2, 3)],
        "classic_fr": [{"s": s} for s in (1, 3)],
        "cce_cr": [{"s": s, "m": m} for s in (1, 2) for m in (1, 2)],
        "cce_fr": [{"s": 1, "m": 1}, {"s": 1, "m": 3}, {"s": 2, "m": 2}],
        "sr_sgc": [
            {"B": B, "W": W, "lam": lam}
            for B, W in ((1, 2), (1, 3), (2, 3), (2, 5))
            for lam in (1, 2, 3, 5)
        ],
        "m_sgc": [
            {"B": B, "W": W, "lam": lam}
            for B, W in ((1, 2), (1, 3), (2, 3), (1, 4))
            for lam in (1, 2, 4)
        ],
        "pipelined_cr": [],
        "pipelined_fr": [],
        "is_cr": [{"c": c} for c in (2, 4)],
        "is_hr": [{"c": 2, "c1": 1, "g": 2}, {"c": 2, "c1": 2, "g": 4}, {"c": 4, "c1": 1, "g": 2}],
    }
)
CASES = [(name, params) for name, settings in SETTINGS.items() for params in settings]


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_wait_all_follows_the_papers_rules(trace: Path, name: str, params: dict) -> None:
    scheme = SCHEMES[name](N, **params)
    model = Trace(str(trace), slope=SLOPE)
    result = simulate(scheme, model, NetworkConfig(mu=MU, recovery="wait_all"), JOBS, seed=0)
    delays = np.load(trace)["durations"] + scheme.load * SLOPE
    durations, waits = papers_rule(delays, name, params)
    np.testing.assert_array_equal(result.durations, durations)
    if name != "uncoded":  # gclab counts a round without stragglers as no wait; so do we
        assert result.waits == waits


def test_the_generated_trace_exercises_every_rule(trace: Path) -> None:
    """Waits, admitted stragglers and skipped SR-SGC drain rounds all occur."""
    wait_all = NetworkConfig(mu=MU, recovery="wait_all")
    model = Trace(str(trace), slope=SLOPE)
    gc = simulate(ClassicCR(N, 1), model, wait_all, JOBS, seed=0)
    assert 0 < gc.waits < JOBS and (gc.erasures > 0).any()
    sr = simulate(SRSGC(N, 2, 3, 2), model, wait_all, JOBS, seed=0)
    assert len(sr.durations) < JOBS + 2 and sr.waits > 0
    m = simulate(MSGC(N, 1, 2, 2), model, wait_all, JOBS, seed=0)
    assert len(m.durations) == JOBS + 1
