"""Random configs either build a usable run or fail with the validation error type.

Hypothesis draws whole command lines: a scheme and a delay option with random
parameters, and values for the numeric keys of every group, one or two of them
deliberately out of range. Each must compose and build (``gclab.app.build``: no Ray)
and then simulate two jobs with the plan's scheme, delay model and network, which
drives the same scheme and round protocol as training, symbolically; or it must fail
with :class:`ConfigError` (one line) or Hydra's ``ConfigCompositionException``. Any other
exception is a traceback from deep inside that a user would see instead of a sentence.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np
from hydra.errors import ConfigCompositionException
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from gclab.app import build
from gclab.coding.contract import SCHEMES as SCHEME_CLASSES
from gclab.errors import ConfigError
from gclab.sim.engine import simulate
from helpers.coding import builtin_schemes
from helpers.config import compose_config

#: Per key: values that are valid on their own, and values that are not.
KEYS: dict[str, tuple[list[object], list[object]]] = {
    "cluster.actors": (["null", 1], [0, 99]),
    "cluster.worker_cpus": ([0.25, 1], [-1, "inf"]),
    "train.rounds": (["null", 1, 3], [0, -1]),
    "train.lr": ([0.05, 0.5], [0, -0.1, "inf", "nan"]),
    "train.momentum": ([0, 0.9], [-0.1, 1]),
    "train.nesterov": (["false"], ["true"]),  # invalid only with momentum 0
    "train.weight_decay": ([0, 5e-4], [-1, "inf"]),
    "network.policy": (["deadline", "all"], ["first"]),
    "network.mu": ([0, 0.5, 2], [-1, "nan", "inf"]),
    "network.rto": ([0.5, 1], [0, -1]),
    "network.latency": ([0, 0.01], [-0.1]),
    "data.train_size": ([96], [0, 2]),
    "data.num_classes": ([2, 10], [1]),
    "model.width": ([2, 4], [0, -1]),
    "seed": ([0, 7], [-1]),
    "faults.crash": (["[]", "[0:0]"], ["[0:99]", "[oops]"]),
}

#: Every built-in scheme with its integer parameters and their defaults (its constructor's).
SCHEMES = {
    name: {
        key: p.default
        for key, p in inspect.signature(SCHEME_CLASSES[name]).parameters.items()
        if isinstance(p.default, int) and not isinstance(p.default, bool)
    }
    for name in builtin_schemes()
}

#: Delay options and their parameters: values valid on their own, and values that are not.
DELAYS: dict[str, dict[str, tuple[list[object], list[object]]]] = {
    "none": {},
    "composite": {},
    "bernoulli": {"p": ([0, 0.1, 0.5], [-0.1, 1, 1.5])},
    "gilbert_elliott": {
        "p_good_bad": ([0, 0.1, 1], [-0.1, 1.2]),
        "p_bad_good": ([0.2, 1], [0]),
        "loss_good": ([0, 0.1], [1]),
        "loss_bad": ([0.5, 1], [1.5]),
    },
    "gilbert_elliott_rate": {"loss_rate": ([0, 0.1], [0.9, 1]), "burst_length": ([4], [0.5])},
    "straggler": {
        "mean": ([0, 0.5], [-1]),
        "slow_workers": ([0, 1], [-1, 9]),
        "slow_factor": ([5], [0.5]),
    },
}


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Overrides of a tiny synthetic run with random groups and values, at most two broken.

    A broken key takes an invalid value; a broken scheme or delay mixes valid and invalid
    parameters. Unbroken parts are valid on their own, so that about half of the
    examples build and get simulated, while keys still interact (nesterov and momentum,
    s and n, batch size and shards, slow workers and n).
    """
    broken = draw(
        st.sets(st.sampled_from([*KEYS, "cluster.workers", "batch", "scheme", "delay"]), max_size=2)
    )

    def pick(key: str, valid: list[object], invalid: list[object]) -> object:
        return draw(st.sampled_from(invalid if key in broken else valid))

    def nearby(default: int) -> st.SearchStrategy[int]:
        """Scheme parameters: near the (valid) default, anywhere small when broken."""
        return st.integers(-1, 6) if "scheme" in broken else st.integers(-1, 1).map(default.__add__)

    workers = pick("cluster.workers", [4, 6, 8, 3, 2, 1], [0, -1])  # 4 fits every default
    k = max(int(workers), 1)  # every built-in scheme has one data shard per worker
    multiple = draw(st.integers(1, 4)) * k
    batch = pick("batch", [multiple], [0, -1, multiple + 1] if k > 1 else [0, -1])
    scheme = draw(st.sampled_from(sorted(SCHEMES)))
    delay = draw(st.sampled_from(sorted(DELAYS)))
    params = {
        p: draw(st.sampled_from([*valid, *invalid] if "delay" in broken else valid))
        for p, (valid, invalid) in DELAYS[delay].items()
    }
    return [
        "data=synthetic", "data.test_size=8", "logger=none", "train.eval_every=0",
        f"scheme={scheme}", f"cluster.workers={workers}", f"train.batch_size={batch}",
        f"delay={delay.removesuffix('_rate')}",
        *(f"scheme.{p}={draw(nearby(default))}" for p, default in SCHEMES[scheme].items()),
        *(f"delay.{p}={v}" for p, v in params.items()),
        *(f"{key}={pick(key, *choices)}" for key, choices in KEYS.items()),
    ]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command_lines())
def test_random_configs_build_and_simulate_or_fail_with_a_config_error(lines: list[str]) -> None:
    note(" ".join(lines))
    try:
        cfg = compose_config(lines)
        plan, _ = build(cfg)
    except ConfigCompositionException:
        event("schema error at compose time")
        return
    except ConfigError as exc:
        assert "\n" not in str(exc), str(exc)
        event("ConfigError")
        return
    event("built")
    network = replace(plan.protocol.network, server_time=0.0)  # the simulator measures none
    result = simulate(plan.scheme, plan.protocol.delay, network, 2, cfg.seed)
    assert plan.scheme.n == cfg.cluster.workers
    # rounds 0 and 1 start the jobs; of the T after them, only those with work left run
    assert result.index[:2].tolist() == [0, 1] and len(result.durations) <= 2 + plan.scheme.T
    assert np.all(np.diff(result.index) > 0) and result.index[-1] < 2 + plan.scheme.T
    assert np.all(np.isfinite(result.durations)) and np.all(result.durations >= 0)
