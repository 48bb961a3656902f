"""The virtual clock does not depend on how logical workers are packed into actors.

Eight logical workers run once in eight actors (four per core of this machine) and once
in two. Each worker's compute time is its thread's CPU time, so the medians agree within
what context switches and cold caches add to CPU time on a crowded machine (up to about
1.3× in CI), far below the 4× oversubscription that wall time would measure here (the
issue's 0.720 s vs 0.071 s); under a deterministic delay model (a rotating 50× straggler)
the rounds erase the same packets.
"""

import time

import numpy as np
import pytest
import torch

from gclab.network import RoundOutcome, RoundProtocol
from gclab.runtime import timing
from gclab.runtime.timing import ComputeTime, Stopwatch, processor
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.training import rotating_straggler_trace, trained_weights

N = 8


def test_cpu_stopwatch_counts_this_threads_work_not_waiting() -> None:
    """Sleeping (as a thread does while other processes hold the cores) is not compute."""
    watch = {m: Stopwatch(m) for m in (ComputeTime.cpu, ComputeTime.wall)}
    for w in watch.values():
        w.start()
    time.sleep(0.3)
    sum(i * i for i in range(200_000))  # some real work
    for w in watch.values():
        w.host_part()
    cpu, wall = watch[ComputeTime.cpu].stop(), watch[ComputeTime.wall].stop()
    assert wall >= 0.3 > cpu > 0


def test_the_processor_names_the_cpu_model_and_the_instruction_set_torch_uses(
    tmp_path, monkeypatch
) -> None:
    capability = torch.backends.cpu.get_cpu_capability()
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t: avx2\n" * 2)
    real_path = timing.Path
    monkeypatch.setattr(timing, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else real_path(p))
    assert processor() == f"AMD EPYC 9R14 ({capability})"
    cpuinfo.unlink()  # not Linux: the platform module's answer
    monkeypatch.setattr(timing.platform, "processor", lambda: "arm")
    assert processor("cpu") == f"arm ({capability})"


@pytest.mark.slow
def test_packing_changes_neither_compute_times_nor_erasures(
    ray_session, tmp_path, monkeypatch
) -> None:
    trace = rotating_straggler_trace(tmp_path / "trace.npz", N, 8)
    base = [
        *TINY, "scheme=classic_cr", "scheme.s=1", f"cluster.workers={N}", "train.rounds=6",
        "model.width=16", "train.batch_size=128", "data.train_size=1024", "delay=trace",
        f"delay.path={trace}", "delay.slope=0", "network.policy=deadline", "network.mu=1",
    ]  # fmt: skip
    erased: list[np.ndarray] = []
    run_round = RoundProtocol.run_round

    def recording(self, *args, **kwargs) -> RoundOutcome:
        outcome = run_round(self, *args, **kwargs)
        erased.append(outcome.erased.copy())
        return outcome

    monkeypatch.setattr(RoundProtocol, "run_round", recording)
    medians, patterns = {}, {}
    for actors in (N, 2):
        erased.clear()
        out = tmp_path / f"actors{actors}"
        trained_weights(compose_config([*base, f"cluster.actors={actors}"]), out)
        rounds = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "round"]
        medians[actors] = float(np.median([r["compute_s"] for r in rounds]))
        patterns[actors] = np.array(erased)
    assert max(medians.values()) <= 2 * min(medians.values()), medians
    assert np.array_equal(patterns[N], patterns[2])
    assert patterns[N].sum(axis=1).tolist() == [1] * 6  # the straggler, and only it, erased
