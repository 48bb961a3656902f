"""``python -m gclab.sim`` end to end, as a user runs it (subprocess, any directory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.bernoulli import Bernoulli
from gclab.network.trace import Trace
from gclab.sim.engine import UNIT_TIME, simulate
from gclab.sim.search import scheme_option

pytestmark = [pytest.mark.slow, pytest.mark.no_ray]  # python -m gclab.sim runs no Ray


def sim(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "gclab.sim", f"hydra.run.dir={out}", *overrides],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, out


def test_run_writes_summary_and_rounds(tmp_path: Path) -> None:
    overrides = ("cluster.workers=8", "sim.jobs=40", "delay=bernoulli", "delay.p=0.1", "seed=5")
    proc, out = sim(tmp_path, *overrides, "network.policy=all")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    network = NetworkConfig(policy="all")  # no compute in the delay model: the default's
    expected = simulate(Uncoded(8), Bernoulli(0.1), network, 40, 5, UNIT_TIME).summary()
    assert {k: summary[k] for k in expected} == expected and summary["unit_time"] == UNIT_TIME
    assert {"total_time", "waits", "retransmissions", "load", "jobs"} <= summary.keys()
    assert len((out / summary["rounds_file"]).read_text().splitlines()) == 41
    assert "uncoded(n=8, s=0, T=0): 40 jobs" in proc.stdout
    assert f"compute {UNIT_TIME:g} s per unit load" in proc.stdout


def test_trace_run_from_another_directory(tmp_path: Path) -> None:
    np.savez(tmp_path / "t.npz", durations=np.full((4, 3), 2.0), load=0.0)
    proc, out = sim(
        tmp_path,
        "cluster.workers=4",
        "sim.jobs=6",
        "delay=trace",
        "delay.path=t.npz",
        "delay.slope=4",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_time"] == pytest.approx(6 * 3.0)  # the trace is the compute time
    assert summary["unit_time"] == 0.0


def test_search_writes_every_grid_point(tmp_path: Path) -> None:
    proc, out = sim(tmp_path, "cluster.workers=4", "sim.jobs=5", "sim.search=true")
    assert proc.returncode == 0, proc.stderr
    trials = json.loads((out / "search.json").read_text())
    assert [t["params"] for t in trials] == [{}]
    assert json.loads((out / "summary.json").read_text())["params"] == {}
    assert "best: {}" in proc.stdout


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
def test_one_command_searches_the_papers_four_schemes(tmp_path: Path, recovery: str) -> None:
    rng = np.random.default_rng(3)
    durations = 1.0 + rng.exponential(0.5, (8, 12)) + 3.0 * (rng.random((8, 12)) < 0.2)
    np.savez(tmp_path / "t.npz", durations=durations, load=0.0)
    proc, out = sim(
        tmp_path,
        "sim.search=true",
        "sim.schemes=[uncoded,classic_cr,sr_sgc,m_sgc]",
        "cluster.workers=8",
        "sim.jobs=8",
        "delay=trace",
        "delay.path=t.npz",
        f"network.recovery={recovery}",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    trials = json.loads((out / "search.json").read_text())
    assert summary["settings"] == len(trials) and 0 < summary["search_seconds"] < 60
    assert set(summary["best"]) == {"uncoded", "classic_cr", "sr_sgc", "m_sgc"}
    assert summary["total_time"] == trials[0]["total_time"] == min(t["total_time"] for t in trials)
    assert [t["total_time"] for t in trials] == sorted(t["total_time"] for t in trials)
    # every setting is what simulating it alone gives
    delay = Trace(str(tmp_path / "t.npz"))
    network = NetworkConfig(recovery=recovery)
    for t in trials[:: max(1, len(trials) // 10)]:
        name = t["scheme"].split("(")[0]
        scheme = instantiate(scheme_option(name), n=8, **t["params"])
        assert simulate(scheme, delay, network, 8, seed=0).summary() == {
            k: t[k] for k in t if k != "params"
        }


def test_search_over_a_chosen_subset(tmp_path: Path) -> None:
    proc, out = sim(
        tmp_path,
        "scheme=classic_fr",
        "cluster.workers=8",
        "sim.jobs=20",
        "sim.search=true",
        "sim.grid=[{s:1},{s:3}]",
        "delay=straggler",
    )
    assert proc.returncode == 0, proc.stderr
    trials = json.loads((out / "search.json").read_text())
    assert sorted(t["params"]["s"] for t in trials) == [1, 3]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("delay=bernoulli", "delay.p=1.5"), "delay.p=1.5 is invalid: it must be a probability"),
        (("delay=trace",), "delay.path is missing"),
        (("network.mu=-1",), "network.mu=-1.0 is invalid"),
        (
            ("network.recovery=sometimes",),
            "network.recovery='sometimes' is invalid: it must be one of decodable, wait_all, "
            "partial.",
        ),
        (("cluster.workers=0",), "cluster.workers=0 is invalid"),
        (("sim.jobs=0",), "sim.jobs=0 is invalid"),
        (("delay=straggler", "delay.slow_workers=9"), "delay.slow_workers=9 is invalid"),
        (("scheme=cce_cr", "sim.search=true"), "no parameter grid for scheme 'cce_cr'"),
        (("sim.search=true", "sim.grid=[]"), "sim.grid=[] is invalid"),
        (("sim.search=true", "sim.schemes=[uncoded,bogus]"), "sim.schemes has 'bogus'"),
        (("sim.search=true", "sim.schemes=[]"), "sim.schemes=[] is invalid"),
        (
            ("sim.search=true", "sim.schemes=[uncoded]", "sim.grid=[{}]"),
            "sim.grid and sim.schemes cannot be combined",
        ),
    ],
)
def test_bad_config_is_one_sentence_and_exit_2(
    tmp_path: Path, overrides: tuple[str, ...], message: str
) -> None:
    proc, out = sim(tmp_path, *overrides)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"gclab.sim: {proc.stderr.split(': ', 1)[1].strip()}"
    ]
    assert message in proc.stderr
    assert not (out / "summary.json").exists()


def test_sweep_over_schemes_with_shared_keys(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gclab.sim", "-m", "scheme=pipelined_cr,pipelined_fr",
         "scheme.s=1", "scheme.T=1,2", "cluster.workers=4", "sim.jobs=5",
         f"hydra.sweep.dir={tmp_path}"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summaries = [json.loads((tmp_path / str(j) / "summary.json").read_text()) for j in range(4)]
    assert [s["scheme"] for s in summaries] == [
        f"{name}(n=4, s=1, T={T})" for name in ("pipelined_cr", "pipelined_fr") for T in (1, 2)
    ]
