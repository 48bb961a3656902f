"""A run continued from its checkpoint ends exactly where the uninterrupted run ends.

For every scheme, those that code across time included (their decoder's packets and
plans, the pending gradients and the workers' encoder accumulators are checkpointed).
The losses and delays are seeded and the round order is fixed by a trace (workers 1 s to
4 s), so the stale pipelines too take the same steps whether or not the run stops.

Fast: the loop with in-process workers, stopped by an exception. Slow: ``python -m
gclab`` on Ray actors, stopped by SIGKILL, then the same command with ``resume=true``.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from gclab.app import run
from gclab.errors import ConfigError
from gclab.tracking.artifacts import load_checkpoint, read_metrics
from helpers.coding import builtin_schemes
from helpers.config import TINY, compose_config
from helpers.inprocess import Stopped, in_process, stopping_at
from helpers.training import assert_same_weights

#: Settings that differ from a scheme's defaults (T > 0 where a scheme has T, so the
#: checkpoint holds undecoded jobs); every built-in scheme runs, pipelined_cr twice.
OVERRIDES = {"m_sgc": ["scheme.lam=1"]}
SCHEMES = {name: [f"scheme={name}", *OVERRIDES.get(name, [])] for name in builtin_schemes()}
SCHEMES["pipelined_cr_interleaved"] = [*SCHEMES["pipelined_cr"], "train.pipeline=interleaved"]

#: What the protocol decided each round: equal in a resumed and an uninterrupted run.
DECIDED = ("round", "jobs_decoded", "decode_delays", "erasures", "lost", "retransmissions")


def overrides(tmp_path, scheme: str, rounds: int) -> list[str]:
    trace = tmp_path / "trace.npz"
    np.savez(trace, durations=np.repeat([[1.0], [2.0], [3.0], [4.0]], 40, axis=1), load=0.0)
    return [
        *TINY, *SCHEMES[scheme], "cluster.workers=4", f"train.rounds={rounds}",
        "train.checkpoint_every=5", "delay=composite", "delay@delay.compute=trace",
        f"delay.compute.path={trace}", "delay.compute.slope=0", "delay@delay.loss=bernoulli",
        "delay.loss.p=0.2", "network.policy=all",
    ]  # fmt: skip


def rounds_of(run_dir) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "round"]


def assert_same_run(got_dir, want_dir) -> None:
    """Every model's weights (float summation order aside) and every round's decisions."""
    got = load_checkpoint(got_dir / "checkpoint.pt")["models"]
    want = load_checkpoint(want_dir / "checkpoint.pt")["models"]
    for g, w in zip(got, want, strict=True):
        assert_same_weights(g, w)
    decided = [[r[k] for k in DECIDED] for r in rounds_of(want_dir)]
    assert [[r[k] for k in DECIDED] for r in rounds_of(got_dir)] == decided
    assert sum(r["lost"] for r in rounds_of(want_dir)) > 0  # the run had losses to recover


#: One scheme of each kind of coding state runs in the fast lane, the others are slow.
FAST = {"classic_cr", "pipelined_cr", "pipelined_cr_interleaved", "sr_sgc", "m_sgc"}


@pytest.mark.parametrize(
    "scheme", [s if s in FAST else pytest.param(s, marks=pytest.mark.slow) for s in SCHEMES]
)
def test_a_stopped_run_resumes_to_the_uninterrupted_runs_end(tmp_path, scheme):
    args = overrides(tmp_path, scheme, 12)
    run(compose_config(args), tmp_path / "ref", start_pool=in_process)
    with pytest.raises(Stopped):
        run(compose_config(args), tmp_path / "cut", start_pool=stopping_at(8))
    checkpoint = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert checkpoint["round"] == 4 and checkpoint["coding"] is not None
    run(compose_config([*args, "resume=true"]), tmp_path / "cut", start_pool=in_process)
    assert_same_run(tmp_path / "cut", tmp_path / "ref")
    assert load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["coding"] is None  # finished


def gclab_cli(*args: str) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.Popen(
        [sys.executable, "-m", "gclab", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def kill_between_checkpoints(run_dir, proc: subprocess.Popen, after: int) -> None:
    """SIGKILL ``proc`` once ``after`` rounds are in metrics.jsonl."""
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        done = rounds_of(run_dir) if (run_dir / "metrics.jsonl").exists() else []
        if len(done) >= after:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


#: The real kill's extra over the fast test above is the Ray pool's encoder state and the
#: checkpoint a SIGKILL leaves: two schemes whose workers hold state (~25 s each).
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["pipelined_cr_interleaved", "m_sgc"])
def test_driver_killed_mid_run_resumes_to_the_same_weights(tmp_path, scheme):
    args = overrides(tmp_path, scheme, 18)
    run(compose_config(args), tmp_path / "ref", start_pool=in_process)  # uninterrupted

    crashed = tmp_path / "crashed"
    proc = gclab_cli(*args, f"hydra.run.dir={crashed}")
    kill_between_checkpoints(crashed, proc, after=12)
    assert load_checkpoint(crashed / "checkpoint.pt")["round"] in (9, 14)

    resumed = gclab_cli(*args, f"hydra.run.dir={crashed}", "resume=true")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()[-2000:]
    assert_same_run(crashed, tmp_path / "ref")
    # each round once, and those the uninterrupted run ran (no idle drain rounds)
    assert [r["round"] for r in rounds_of(crashed)] == [
        r["round"] for r in rounds_of(tmp_path / "ref")
    ]


def test_resume_is_refused_without_a_checkpoint_or_with_another_config(tmp_path):
    args = overrides(tmp_path, "classic_cr", 2)
    with pytest.raises(ConfigError, match=r"resume=true but .*checkpoint\.pt does not exist"):
        run(compose_config([*args, "resume=true"]), tmp_path / "run", start_pool=in_process)
    run(compose_config(args), tmp_path / "run", start_pool=in_process)
    changed = [*args, "train.lr=0.5", "seed=3", "resume=true"]
    with pytest.raises(ConfigError) as info:
        run(compose_config(changed), tmp_path / "run", start_pool=in_process)
    assert "the config differs from the one that wrote" in str(info.value)
    assert "seed: 0 in the run, 3 now; train.lr: 0.05 in the run, 0.5 now" in str(info.value)
    with pytest.raises(ConfigError, match=r"already holds a run .*continue it with resume=true"):
        run(compose_config(args), tmp_path / "run", start_pool=in_process)  # not resume
