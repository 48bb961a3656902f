"""Bad input costs seconds, not a night: every case fails in one sentence, before Ray.

Each case names the bad value and what would be valid. Value errors are
:class:`ConfigError` raised by ``gclab.app.build`` (which never touches Ray) or by the
simulator's ``prepare``; schema errors (unknown option, misspelt key, wrong type) are
Hydra's ``ConfigCompositionException`` at compose time. The CLI cases at the end check
what a user sees: exit code 2, one ``gclab: error:`` line on stderr (schema errors too),
no traceback, and the run directory as it was but for error.txt and Hydra's record (no
lock file: a refusal found after the Hydra callback locked the directory lets it go).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import ray
from hydra.errors import ConfigCompositionException, InstantiationException
from omegaconf import DictConfig, OmegaConf

from gclab.app import build, run
from gclab.errors import ConfigError
from gclab.rundir.guard import config_text
from gclab.runtime import cluster as cluster_module
from gclab.runtime.cluster import Cluster
from gclab.sim.__main__ import prepare
from gclab.sim.engine import simulate, unit_time
from gclab.tracking.artifacts import save_checkpoint
from helpers.config import TINY, assert_one_sentence, compose_config
from helpers.net import free_port

#: TINY with a smaller training set, so that building a case (it loads data) is quick.
BASE = [o for o in TINY if not o.startswith("data.")] + ["data.train_size=128", "data.test_size=16"]


def overrides(extra: list[str], files: Path) -> list[str]:
    """BASE plus ``extra`` (``{files}`` filled in); a ``data=`` option drops BASE's data keys."""
    extra = [o.format(files=files) for o in extra]
    swaps_data = any(o.startswith("data=") for o in extra)
    return [o for o in BASE if not (swaps_data and o.startswith("data"))] + extra


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Malformed traces and data roots that the cases below point at."""
    root = tmp_path_factory.mktemp("bad_input")
    good = np.ones((4, 3))
    np.savez(root / "wrong_keys.npz", times=good, load=0.0)
    np.savez(root / "one_dim.npz", durations=np.ones(4), load=0.0)
    np.savez(root / "nan.npz", durations=np.where(good > 0, np.nan, 0.0), load=0.0)
    np.savez(root / "negative.npz", durations=-good, load=0.0)
    np.savez(root / "no_load.npz", durations=good)
    np.savez(root / "short.npz", durations=np.ones((2, 3)), load=0.0)
    (root / "not_npz.npz").write_text("durations: 1, 2, 3\n")
    (root / "only_train" / "train" / "cat").mkdir(parents=True)
    for split in ("train", "test"):
        (root / "no_classes" / split).mkdir(parents=True)
        (root / "not_images" / split / "cat").mkdir(parents=True)
        (root / "not_images" / split / "cat" / "x.png").write_text("not a png")
    (root / "empty").mkdir()
    return root


# (id, overrides, what the sentence must say). None of these is in tests/test_app.py.
BUILD_CASES = [
    # scheme
    ("s-at-least-n", ["scheme=classic_cr", "scheme.s=4"],
     r"scheme\.s=4 needs 0 <= s < n but n=4; valid s for n=4: 0, 1, 2, 3\."),
    ("fr-s-plus-1-not-dividing-n", ["scheme=classic_fr", "scheme.s=2"],
     r"scheme\.s=2 needs \(s\+1\) \| n but n=4; valid s for n=4: 0, 1, 3\."),
    ("cce-s-plus-m-above-n", ["scheme=cce_cr", "scheme.s=2", "scheme.m=3"],
     r"scheme\.s=2, scheme\.m=3 needs s \+ m <= n but n=4; valid m for s=2, n=4: 1, 2\."),
    ("cce-fr-group-not-dividing-n", ["scheme=cce_fr", "scheme.s=1", "scheme.m=2"],
     r"scheme\.s=1, scheme\.m=2 needs \(s\+m\) \| n but n=4; valid m for s=1, n=4: 1, 3\."),
    ("negative-T", ["scheme=pipelined_cr", "scheme.T=-1"],
     r"scheme\.T=-1 needs T >= 0 .*valid T: 0, 1, 2, 3\."),
    ("sgc-B-not-dividing-W-1", ["scheme=sr_sgc", "scheme.B=2", "scheme.W=4"],
     r"scheme\.B=2, scheme\.W=4 needs B \| \(W-1\) .*valid W for B=2: 3, 5"),
    ("msgc-lam-above-n", ["scheme=m_sgc", "scheme.lam=9"],
     r"scheme\.lam=9 needs 0 <= lam <= n but n=4; valid lam for n=4: 0, 1, 2, 3, 4\."),
    ("is-cr-c-not-dividing-n", ["scheme=is_cr", "scheme.c=3"],
     r"scheme\.c=3 needs c \| n but n=4; valid c for n=4: 1, 2, 4\."),
    ("is-hr-g-not-dividing-n", ["scheme=is_hr", "scheme.g=3"],
     r"scheme\.g=3 needs g \| n but n=4; valid g for n=4: 1, 2, 4\."),
    ("is-hr-c-not-dividing-a-group", ["scheme=is_hr", "scheme.c=4"],
     r"scheme\.c=4 needs c \| n/g but n/g=2 \(n=4, g=2\); valid c for n=4, g=2: 1, 2\."),
    ("is-hr-c1-above-c", ["scheme=is_hr", "scheme.c1=3"],
     r"scheme\.c1=3 needs 0 <= c1 <= c but c=2; valid c1 for c=2: 0, 1, 2\."),
    ("unknown-construction", ["scheme=classic_cr", "scheme.construction=foo"],
     r"scheme\.construction='foo' is not a classic_cr construction; "
     r"valid: rotation, real, tandon\."),
    # model
    ("zero-width", ["model.width=0"], r"model\.width=0 is invalid: it must be an integer >= 1\."),
    ("num-classes-not-the-data's", ["model.num_classes=5"],
     r"model\.num_classes=5 does not match the 10 classes of the training data; leave it "
     r"unset \(null\)"),
    # data
    ("empty-training-set", ["data.train_size=0"], r"data\.train_size=0 is invalid: .* >= 1\."),
    ("one-class", ["data.num_classes=1"], r"data\.num_classes=1 is invalid: .* >= 2\."),
    ("root-without-test", ["data=image_folder", "data.root={files}/only_train"],
     r"data\.root=.*only_train has no test/ folder; image_folder needs root/train/<class>/ "
     r"and root/test/<class>/"),
    ("root-without-class-folders", ["data=image_folder", "data.root={files}/no_classes"],
     r"data\.root=.*no_classes: train/ holds no images .*root/train/<class>/<image file>\."),
    ("unreadable-image", ["data=image_folder", "data.root={files}/not_images"],
     r"cannot read .*x\.png as an image \(UnidentifiedImageError\); fix or remove it\."),
    ("root-not-given", ["data=image_folder"],
     r"data\.root is missing: give it on the command line, e.g\. data\.root=\.\.\."),
    ("cifar-not-downloaded", ["data=cifar10", "data.root={files}/empty", "data.download=false"],
     r"data\.root=.*empty does not hold CIFAR-10 .*or data=synthetic for an offline run\."),
    ("cifar-layout-missing", ["data=cifar10", "data.root={files}/empty", "data.verify=false"],
     r"data\.verify=false needs the CIFAR-10 python layout, but .*data_batch_1 is missing\."),
    # delay
    ("p-above-one", ["delay=bernoulli", "delay.p=1.5"],
     r"delay\.p=1\.5 is invalid: it must be a probability in \[0, 1\]\."),
    ("p-one-loses-everything", ["delay=bernoulli", "delay.p=1"],
     r"delay\.p=1 is invalid: every transmission would be lost.*\[0, 1\)\."),
    ("ge-absorbing-bad-state", ["delay=gilbert_elliott", "delay.p_good_bad=0.1",
                                "delay.p_bad_good=0"],
     r"delay\.p_bad_good=0\.0 is invalid: it must be a probability in \(0, 1\]\."),
    ("ge-probability-above-one", ["delay=gilbert_elliott", "delay.p_good_bad=1.2",
                                  "delay.p_bad_good=0.5"],
     r"delay\.p_good_bad=1\.2 is invalid: it must be a probability in \[0, 1\]\."),
    ("ge-half-a-chain", ["delay=gilbert_elliott", "delay.p_good_bad=0.1"],
     r"delay\.p_bad_good is missing: the chain needs both probabilities\."),
    ("ge-no-chain", ["delay=gilbert_elliott"],
     r"delay\.p_good_bad and p_bad_good, or loss_rate and burst_length: the chain needs "
     r"one of these pairs\."),
    ("ge-chain-and-rate", ["delay=gilbert_elliott", "delay.p_good_bad=0.1",
                           "delay.p_bad_good=0.5", "delay.loss_rate=0.1"], r", not both\."),
    ("ge-rate-impossible-for-burst", ["delay=gilbert_elliott", "delay.loss_rate=0.9",
                                      "delay.burst_length=1"],
     r"delay\.loss_rate=0\.9 is impossible with burst_length=1\.0: it must be <= .* = 0\.5\."),
    ("ge-burst-below-one-round", ["delay=gilbert_elliott", "delay.loss_rate=0.1",
                                  "delay.burst_length=0.5"],
     r"delay\.burst_length=0\.5 is invalid: it must be >= 1 round\."),
    ("ge-loses-everything", ["delay=gilbert_elliott", "delay.p_good_bad=0.1",
                             "delay.p_bad_good=0.5", "delay.loss_good=1", "delay.loss_bad=1"],
     r"delay\.loss_good=1 with loss_bad=1\.0 .*loses every transmission.*lower loss_good"),
    ("straggler-negative-mean", ["delay=straggler", "delay.mean=-1"],
     r"delay\.mean=-1\.0 is invalid: it must be >= 0\."),
    ("more-slow-workers-than-workers", ["delay=straggler", "delay.slow_workers=9"],
     r"delay\.slow_workers=9 is invalid: the run has only 4 workers\."),
    ("composite-bad-part", ["delay=composite", "delay.loss.p=2"],
     r"delay\.loss\.p=2\.0 is invalid: it must be a probability"),
    ("composite-part-fails-its-check", ["delay=composite", "delay.compute.slow_workers=9"],
     r"delay\.compute\.slow_workers=9 is invalid: the run has only 4 workers\."),
    ("trace-without-path", ["delay=trace"],
     r"delay\.path is missing: a trace replay needs the path of an \.npz trace\."),
    ("trace-missing", ["delay=trace", "delay.path={files}/absent.npz"],
     r"delay\.path='.*absent\.npz' is not a file: give the path of an \.npz trace\."),
    ("trace-not-npz", ["delay=trace", "delay.path={files}/not_npz.npz"],
     r"delay\.path='.*not_npz\.npz' is not a readable \.npz trace"),
    ("trace-wrong-keys", ["delay=trace", "delay.path={files}/wrong_keys.npz"],
     r"trace wrong_keys\.npz has keys \['load', 'times'\] but needs 'durations'"),
    ("trace-wrong-shape", ["delay=trace", "delay.path={files}/one_dim.npz"],
     r"trace one_dim\.npz: 'durations' has shape \(4,\) .* workers × rounds array\."),
    ("trace-nan", ["delay=trace", "delay.path={files}/nan.npz"],
     r"trace nan\.npz: 'durations' must be finite and >= 0"),
    ("trace-negative", ["delay=trace", "delay.path={files}/negative.npz"],
     r"trace negative\.npz: 'durations' must be finite and >= 0"),
    ("trace-without-load", ["delay=trace", "delay.path={files}/no_load.npz"],
     r"delay\.base_load is missing: trace .*no_load\.npz has no 'load' entry; set base_load "
     r"to the load it was recorded at\."),
    ("trace-too-short", ["delay=trace", "delay.path={files}/short.npz", "delay.beyond=error"],
     r"delay\.beyond=error but trace short\.npz has 2 workers × 3 rounds and the run needs "
     r"4 × 4: .*beyond=wrap"),
    # network
    ("negative-rto", ["network.rto=-1"],
     r"network\.rto=-1\.0 is invalid: it must be a finite number > 0\."),
    ("negative-mu", ["network.mu=-1"],
     r"network\.mu=-1\.0 is invalid: it must be a finite number >= 0\."),
    ("partial-across-rounds", ["scheme=pipelined_cr", "scheme.T=1", "network.recovery=partial"],
     r"network\.recovery=partial is not supported by pipelined_cr, a code across rounds "
     r"whose packets mix several jobs.*use recovery=decodable or wait_all\."),
    *[
        (f"{key}-not-positive", [f"network.{key}={value}"],
         rf"network\.{key}={value}\.0 is invalid: it must be a rate in bytes/s > 0, or null")
        for key, value in [("bandwidth", 0), ("server_bandwidth", -1), ("broadcast_bandwidth", 0)]
    ],
    ("negative-server-time", ["network.server_time=-0.5"],
     r"network\.server_time=-0\.5 is invalid: it must be 'measured' or a number of seconds >= 0"),
    ("unknown-server-time", ["network.server_time=guess"],
     r"network\.server_time='guess' is invalid: it must be 'measured' or a number"),
    ("shared-link-on-the-wall-clock", ["network.clock=wall", "network.server_bandwidth=1e6"],
     r"network\.server_bandwidth=1000000\.0 needs clock=virtual"),
    ("burst-seconds-not-positive", ["delay=gilbert_elliott_time", "delay.burst_seconds=0"],
     r"delay\.burst_seconds=0\.0 is invalid: it must be a number of seconds > 0\."),
    # cluster
    ("port-out-of-range", ["cluster=ray", "cluster.address=127.0.0.1:99999"],
     r"cluster\.address='127\.0\.0\.1:99999' is invalid \(expected host:port with a port in "
     r"1\.\.65535\): use null .*, auto, ray://host:port or host:port\."),
    ("address-without-port", ["cluster=ray", "cluster.address=headnode"],
     r"cluster\.address='headnode' is invalid"),
    ("infinite-cpus", ["cluster.worker_cpus=inf"],
     r"cluster\.worker_cpus=inf .* both must be finite and >= 0"),
    ("zero-timeout", ["cluster.timeout=0"], r"cluster\.timeout=0\.0 is invalid: it must be > 0"),
    ("cuda-clock-on-cpu", ["cluster.compute_time=cuda"],
     r"cluster\.compute_time=cuda times GPU work, but the workers compute on the CPU"),
    ("cuda-without-gpu", ["cluster.device=cuda", "cluster.worker_gpus=1"],
     r"cluster\.device=cuda with worker_gpus=1\.0 needs a GPU, but none is visible"),
    ("gpus-without-gpu", ["cluster.worker_gpus=0.5"],
     r"cluster\.device=auto with worker_gpus=0\.5 needs a GPU, but none is visible"),
    ("cuda-without-reserved-gpus", ["cluster.device=cuda"],
     r"cluster\.device=cuda needs worker_gpus > 0 \(Ray shows an actor only"),
    ("gpus-on-cpu-device", ["cluster.device=cpu", "cluster.worker_gpus=1"],
     r"cluster\.worker_gpus=1\.0 reserves GPUs that device=cpu never uses"),
    ("server-cuda-without-gpu", ["cluster.server_device=cuda"],
     r"cluster\.server_device=cuda but this process sees no GPU; use"),
    ("cpu-clock-with-threads", ["cluster.compute_time=cpu", "cluster.threads_per_actor=2"],
     r"cluster\.compute_time=cpu measures one thread's CPU time, but "
     r"threads_per_actor=2; use compute_time=wall"),
    # train
    ("batch-smaller-than-partitions", ["train.batch_size=2"],
     r"train\.batch_size=2 is not divisible by the 4 data shards .*a multiple of 4, e\.g\. 4\."),
    ("batch-zero", ["train.batch_size=0"], r"train\.batch_size=0 must be >= 1\."),
    ("rounds-zero", ["train.rounds=0"], r"train\.rounds=0 is invalid: it must be >= 1"),
    ("infinite-lr", ["train.lr=inf"], r"train\.lr=inf is invalid: .* a finite number > 0\."),
    ("infinite-epochs", ["train.rounds=null", "train.epochs=inf"],
     r"train\.epochs=inf is invalid: it must be a finite number > 0\."),
    ("negative-weight-decay", ["train.weight_decay=-1"],
     r"train\.weight_decay=-1\.0 must be a finite number >= 0\."),
    ("nesterov-without-momentum", ["train.nesterov=true", "train.momentum=0"],
     r"train\.nesterov=true needs train\.momentum > 0"),
    ("negative-seed", ["seed=-1"], r"seed=-1 is invalid: it must be an integer >= 0\."),
    # faults
    ("malformed-fault", ["faults.crash=[x]"],
     r"faults\.crash entry 'x' is invalid: write it as 'round:worker'\."),
    ("fault-on-missing-worker", ["faults.stall=[0:9:1]"],
     r"faults\.stall entry '0:9:1' is invalid: .*worker in \[0, 4\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "pattern"), [pytest.param(e, p, id=i) for i, e, p in BUILD_CASES]
)
def test_training_config_fails_in_build_with_one_sentence(
    extra: list[str], pattern: str, files: Path
) -> None:
    cfg = compose_config(overrides(extra, files))
    had_ray = ray.is_initialized()
    with pytest.raises(ConfigError) as info:
        build(cfg)
    assert ray.is_initialized() == had_ray  # build never starts (or joins) Ray
    assert_one_sentence(str(info.value), pattern)


COMPOSE_CASES = [
    *[
        (f"unknown-{group}", [f"{group}=nope"], rf"Could not find '{group}/nope'.*"
         rf"Available options in '{group}':.*{option}")
        for group, option in [("scheme", "classic_cr"), ("model", "resnet18"),
                              ("data", "synthetic"), ("delay", "gilbert_elliott"),
                              ("cluster", "local"), ("logger", "none")]
    ],
    ("s-not-an-integer", ["scheme=classic_cr", "scheme.s=1.5"],
     r"scheme\.s=1\.5.*could not be converted to Integer"),
    ("misspelt-delay-key", ["delay=bernoulli", "delay.pp=0.1"], r"delay\.pp"),
    ("resume-not-a-bool", ["resume=maybe"], r"resume=maybe.*Value 'maybe' is not a valid bool"),
    ("unknown-schedule", ["train.schedule=linear"],
     r"train\.schedule=linear.*Invalid value 'linear', expected one of \[constant, cosine, step\]"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "pattern"), [pytest.param(e, p, id=i) for i, e, p in COMPOSE_CASES]
)
def test_schema_errors_fail_at_compose_time(extra: list[str], pattern: str, files: Path) -> None:
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(overrides(extra, files))
    chain, cause = [], info.value
    while cause is not None:  # Hydra puts the offending key in one layer, the reason in another
        chain.append(str(cause))
        cause = cause.__cause__
    assert re.search(pattern, "\n".join(chain), re.DOTALL), chain


def sim_error(extra: list[str]) -> ConfigError:
    """The ConfigError the simulator reports for ``extra`` (through Hydra's wrapper, if any)."""
    cfg = compose_config(extra, name="sim")
    with pytest.raises((ConfigError, InstantiationException)) as info:
        scheme, delay, network, _ = prepare(cfg)
        compute = unit_time(cfg.sim.unit_time, delay)
        simulate(scheme, delay, network, cfg.sim.jobs, cfg.seed, compute, cfg.sim.payload_bytes)
    cause: BaseException | None = info.value
    while cause is not None and not isinstance(cause, ConfigError):
        cause = cause.__cause__
    assert cause is not None, f"no ConfigError behind {info.value!r}"
    return cause


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        (["cluster.workers=0"], r"cluster\.workers=0 is invalid: it must be an integer >= 1\."),
        (["scheme=classic_fr", "cluster.workers=8", "scheme.s=2"],
         r"scheme\.s=2 needs \(s\+1\) \| n but n=8; valid s for n=8: 0, 1, 3, 7\."),
        (["sim.jobs=0"], r"sim\.jobs=0 is invalid: it must be an integer >= 1\."),
        (["sim.unit_time=-1"], r"sim\.unit_time=-1\.0 is invalid: it must be a finite number"),
        (["sim.search=true", "sim.grid=[]"], r"sim\.grid=\[\] is invalid: give at least one"),
        (["seed=-1"], r"seed=-1 is invalid: it must be an integer >= 0\."),
        (["network.clock=wall"],
         r"network\.clock='wall' is not supported by the simulator.*use network\.clock=virtual"),
        (["network.server_time=measured"],
         r"network\.server_time=measured is not supported by the simulator.*seconds per round"),
        (["sim.payload_bytes=-1"], r"sim\.payload_bytes=-1\.0 is invalid: it must be a number of"),
        (["network.bandwidth=-2"], r"network\.bandwidth=-2\.0 is invalid: it must be a rate"),
        (["delay=gilbert_elliott_time", "delay.burst_seconds=-1"],
         r"delay\.burst_seconds=-1\.0 is invalid: it must be a number of seconds > 0\."),
        (["scheme=m_sgc", "network.recovery=partial"],
         r"network\.recovery=partial is not supported by m_sgc, a code across rounds"),
    ],
    ids=["zero-workers", "fr-s", "zero-jobs", "negative-unit-time", "empty-grid", "negative-seed",
         "wall-clock", "measured-server-time", "negative-payload", "negative-bandwidth",
         "negative-burst-seconds", "partial-across-rounds"],
)  # fmt: skip
def test_simulator_config_fails_before_any_round(extra: list[str], pattern: str) -> None:
    assert_one_sentence(str(sim_error(extra)), pattern)


@pytest.fixture
def resume_cfg() -> DictConfig:
    return compose_config([*BASE, "resume=true"])


def test_resume_without_checkpoint_fails_before_ray(tmp_path: Path, resume_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        run(resume_cfg, tmp_path)
    assert_one_sentence(
        str(info.value), rf"resume=true but {re.escape(str(tmp_path))}/checkpoint\.pt does not"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written for a rejected run


def test_resume_from_a_corrupt_checkpoint_fails_without_unsafe_advice(
    tmp_path: Path, resume_cfg
) -> None:
    (tmp_path / "checkpoint.pt").write_bytes(b"half a checkpoint")
    with pytest.raises(ConfigError) as info:
        run(resume_cfg, tmp_path)
    assert_one_sentence(str(info.value), r"checkpoint\.pt is not a readable gclab checkpoint")
    assert "weights_only" not in str(info.value)  # torch's own message suggests turning it off


def test_resume_with_a_changed_config_fails(tmp_path: Path, resume_cfg) -> None:
    save_checkpoint(tmp_path / "checkpoint.pt", {"config": "seed: 1\n", "round": 0})
    with pytest.raises(ConfigError) as info:
        run(resume_cfg, tmp_path)
    assert_one_sentence(str(info.value), r"the config differs from the one that wrote")
    assert "resume with the same overrides as the run" in str(info.value)


def test_resume_of_a_run_an_older_gclab_wrote_says_so(tmp_path: Path, resume_cfg) -> None:
    older = OmegaConf.create(config_text(resume_cfg))
    del older.cluster["bf16"], older.train["stale_lr"]  # keys that gclab did not have yet
    save_checkpoint(tmp_path / "checkpoint.pt", {"config": OmegaConf.to_yaml(older), "round": 0})
    with pytest.raises(ConfigError) as info:
        run(resume_cfg, tmp_path)
    assert_one_sentence(
        str(info.value),
        r"\(cluster\.bf16: unset in the run, False now; train\.stale_lr: unset in the run, "
        r"constant now\); an older gclab without these keys wrote it: finish it with that version",
    )


def test_a_run_refused_as_its_workers_start_leaves_the_directory_as_it_was(
    tmp_path: Path,
) -> None:
    """No cluster, or no room on it, is found once the lock is held: nothing is written."""

    def no_room(*args: object) -> None:
        raise ConfigError("the worker actors can never start: they ask for 64 CPUs.")

    with pytest.raises(ConfigError, match="can never start"):
        run(compose_config(BASE), tmp_path / "made" / "run", start_pool=no_room)
    assert list(tmp_path.iterdir()) == []  # no lock, no metrics.jsonl, not even the folders


def test_cluster_address_nobody_listens_on_fails_in_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The TCP probe refuses before ``ray.init`` (which would retry for minutes)."""

    def must_not_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("ray.init was called for an address nobody listens on")

    # Another test may hold the session Ray: pretend there is none, and forbid starting one.
    monkeypatch.setattr(cluster_module.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(cluster_module.ray, "init", must_not_start)
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(ConfigError) as info:
        Cluster(address=address).connect()
    assert time.monotonic() - start < 10
    assert_one_sentence(
        str(info.value),
        rf"cluster\.address='{re.escape(address)}': no Ray cluster answered .*cluster=local\.",
    )


# CLI: (id, module, arguments, exit code, stderr line). Started together: ~6 s on 2 cores.
CLI_CASES = [
    ("fr-s", "gclab", [*BASE, "scheme=classic_fr", "scheme.s=2"], 2,
     "gclab: error: scheme.s=2 needs (s+1) | n but n=4; valid s for n=4: 0, 1, 3."),
    ("root-not-given", "gclab", ["data=image_folder", "logger=none"], 2,
     "gclab: error: data.root is missing: give it on the command line, e.g. data.root=..."),
    ("resume-without-checkpoint", "gclab", [*BASE, "resume=true"], 2,
     "gclab: error: resume=true but "),
    ("target-above-one", "gclab", [*BASE, "train.target_accuracy=1.5"], 2,
     "gclab: error: train.target_accuracy=1.5 must be in (0, 1] or null."),
    ("address-nobody-listens-on", "gclab", [*BASE, "cluster=ray", "cluster.address=127.0.0.1:1"],
     2, "gclab: error: cluster.address='127.0.0.1:1': no Ray cluster answered"),
    ("unknown-scheme", "gclab", [*BASE, "scheme=nope"], 2,
     "gclab: error: In 'config': Could not find 'scheme/nope'. Available options in 'scheme': "),
    ("misspelt-key", "gclab", [*BASE, "train.lrr=0.1"], 2,
     "gclab: error: Could not override 'train.lrr': Key 'lrr' not in 'TrainConfig'."),
    ("simulator-experiment", "gclab", ["experiment=lambda_traces"], 2,
     "gclab: error: experiment=lambda_traces belongs to the simulator"),
    ("training-experiment", "gclab.sim", ["experiment=smoke"], 2,
     "gclab.sim: experiment=smoke belongs to the training app"),
    ("sim-wrong-type", "gclab.sim", ["sim.jobs=many"], 2,
     "gclab.sim: Error merging override sim.jobs=many: Value 'many' of type 'str' could not"),
    ("sim-p-one", "gclab.sim", ["delay=bernoulli", "delay.p=1"], 2,
     "gclab.sim: delay.p=1 is invalid: every transmission would be lost"),
    ("sim-nan-trace", "gclab.sim", ["delay=trace", "delay.path={files}/nan.npz"], 2,
     "gclab.sim: trace nan.npz: 'durations' must be finite and >= 0"),
    ("sim-wall-clock", "gclab.sim", ["network.clock=wall"], 2,
     "gclab.sim: network.clock='wall' is not supported by the simulator"),
    ("sweep-key-one-scheme-lacks", "gclab", ["-m", *BASE, "scheme=classic_cr,uncoded",
                                             "scheme.s=1"], 2,
     "gclab: error: scheme=uncoded has no key 's', so scheme.s=1 cannot apply"),
    ("sim-sweep-key-one-scheme-lacks", "gclab.sim", ["-m", "scheme=pipelined_cr,classic_fr",
                                                     "scheme.T=1"], 2,
     "gclab.sim: scheme=classic_fr has no key 'T', so scheme.T=1 cannot apply"),
    ("cuda-without-gpu", "gclab", [*BASE, "cluster.device=cuda", "cluster.worker_gpus=1"], 2,
     "gclab: error: cluster.device=cuda with worker_gpus=1.0 needs a GPU, but none"),
    ("gpus-on-cpu-device", "gclab", [*BASE, "cluster.worker_gpus=1", "cluster.device=cpu"], 2,
     "gclab: error: cluster.worker_gpus=1.0 reserves GPUs that device=cpu never uses"),
    ("unknown-placement", "gclab", [*BASE, "cluster.placement=diagonal"], 2,
     "gclab: error: cluster.placement='diagonal' is invalid: it must be one of pack, spread."),
    ("unknown-launcher", "gclab", [*BASE, "hydra/launcher=nope"], 2,
     "gclab: error: hydra/launcher=nope is not an installed Hydra launcher; valid: "),
    ("sim-unknown-launcher", "gclab.sim", ["-m", "hydra/launcher=nope"], 2,
     "gclab.sim: hydra/launcher=nope is not an installed Hydra launcher; valid: "),
]  # fmt: skip


@pytest.fixture(scope="module")
def cli_results(
    files: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[subprocess.CompletedProcess[str], Path]]]:
    """Run every CLI case at once (each mostly waits on imports), keyed by id."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    started = {}
    for case, module, args, _, _ in CLI_CASES:
        out = tmp_path_factory.mktemp(case)
        args = [a.format(files=files) for a in args]
        argv = [sys.executable, "-m", module, *args, f"hydra.run.dir={out}"]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        started[case] = (argv, out, subprocess.Popen(argv, env=env, cwd=out, **pipes))
    results = {}
    try:
        for case, (argv, out, proc) in started.items():
            stdout, stderr = proc.communicate(timeout=180)
            results[case] = (
                subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr),
                out,
            )
        yield results
    finally:
        for _, _, proc in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "code", "line"),
    [pytest.param(c, code, line, id=c) for c, _, _, code, line in CLI_CASES],
)
def test_cli_exits_with_one_line_and_no_traceback(
    cli_results: dict[str, tuple[subprocess.CompletedProcess[str], Path]],
    case: str,
    code: int,
    line: str,
) -> None:
    proc, out = cli_results[case]
    assert proc.returncode == code, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0, proc.stderr[-2000:]  # one line, nothing else
    assert proc.stderr.startswith(line), proc.stderr[-2000:]
    assert "Started a local Ray" not in proc.stderr
    # as it was found (empty), but for error.txt and Hydra's record: no lock, no metrics
    assert {p.name for p in out.iterdir()} <= {".hydra", "error.txt", "gclab.log", "gclab.sim.log"}
