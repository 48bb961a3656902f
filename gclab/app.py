"""Composition root of ``python -m gclab``: validate, instantiate, train, record.

Everything that can be wrong with a config is found here, before Ray starts, and
reported as one sentence (``ConfigError``, exit code 2); nothing is written for a
rejected run. Anything else that fails is a bug or the environment: its traceback
shows (exit code 1, :mod:`gclab.cli`).
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import gclab.config  # noqa: F401  (registers every schema in Hydra's ConfigStore)
from gclab import CONF_DIR
from gclab.adapt.decide import controller, require_static
from gclab.cli import PREFIXES, fail, run_app
from gclab.config import Pipeline
from gclab.errors import ConfigError, under
from gclab.ml.evalset import subset_indices
from gclab.ml.optim import make_optimizer
from gclab.network.protocol import NetworkConfig, RoundProtocol, check_recovery
from gclab.rundir.guard import check_run_dir, config_text
from gclab.rundir.interrupts import Stop, handled, stop_of
from gclab.rundir.lock import DirectoryInUse, held, released
from gclab.rundir.resumehint import stopped_sentence
from gclab.runtime.faults import FaultConfig, Faults
from gclab.schemas import instantiate_checked, instantiate_scheme

if TYPE_CHECKING:
    from gclab.runtime.server import PoolFactory, TrainingPlan
    from gclab.tracking.loggers import Logger

log = logging.getLogger("gclab")

PREFIX = PREFIXES["config"]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _nearest_multiples(value: int, k: int) -> str:
    """``"28 or 32"`` for 30 and k=4; only ``"4"`` for 2 (no positive multiple below)."""
    below, above = value - value % k, value + k - value % k
    return f"{below} or {above}" if below >= k else str(above)


def validate_train(train: DictConfig) -> None:
    """Range checks of the ``train`` group (types are checked by the schema)."""
    _check(
        0 < train.epochs < math.inf,
        f"train.epochs={train.epochs} is invalid: it must be a finite number > 0.",
    )
    _check(
        train.rounds is None or train.rounds >= 1,
        f"train.rounds={train.rounds} is invalid: it must be >= 1 (or null to use epochs).",
    )
    _check(train.batch_size >= 1, f"train.batch_size={train.batch_size} must be >= 1.")
    _check(
        0 < train.lr < math.inf,
        f"train.lr={train.lr} is invalid: the learning rate must be a finite number > 0.",
    )
    _check(0 <= train.momentum < 1, f"train.momentum={train.momentum} must be in [0, 1).")
    _check(  # torch.optim.SGD refuses it, but only when the server builds the optimizer
        not train.nesterov or train.momentum > 0,
        "train.nesterov=true needs train.momentum > 0; set a momentum or nesterov=false.",
    )
    _check(
        0 <= train.weight_decay < math.inf,
        f"train.weight_decay={train.weight_decay} must be a finite number >= 0.",
    )
    _check(train.eval_every >= 0, f"train.eval_every={train.eval_every} must be >= 0 (0 = off).")
    _check(
        train.checkpoint_every >= 0,
        f"train.checkpoint_every={train.checkpoint_every} must be >= 0 (0 = off).",
    )
    _check(
        train.target_accuracy is None or 0 < train.target_accuracy <= 1,
        f"train.target_accuracy={train.target_accuracy} must be in (0, 1] or null.",
    )
    _check(
        not train.stop_at_target or (train.target_accuracy is not None and train.eval_every > 0),
        "train.stop_at_target=true needs a train.target_accuracy and train.eval_every > 0 "
        f"(got target_accuracy={train.target_accuracy}, eval_every={train.eval_every}).",
    )
    _check(
        train.time_budget is None or 0 < train.time_budget < math.inf,
        f"train.time_budget={train.time_budget} is invalid: it must be a finite number of "
        "virtual seconds > 0 (or null for no budget).",
    )
    _check(
        not train.confirm_target or (train.target_accuracy is not None and train.eval_every > 0),
        "train.confirm_target=true needs a train.target_accuracy and train.eval_every > 0 "
        f"(got target_accuracy={train.target_accuracy}, eval_every={train.eval_every}).",
    )
    _check(
        train.eval_subset is None or train.eval_subset >= 1,
        f"train.eval_subset={train.eval_subset} is invalid: it must be a number of test "
        "images >= 1 (or null for the whole test set).",
    )


def interleaving(train: DictConfig, T: int) -> tuple[int, list[float]]:
    """The models a run trains and each one's learning rate, from ``train.pipeline``,
    ``train.models`` and ``train.lrs`` for a scheme with delay ``T``.

    ``stale`` trains one model. ``interleaved`` trains ``train.models`` (default T+1) in
    turn, job t on model t mod M: each is exact SGD only if its previous job is applied
    before its next starts, i.e. M >= T+1. ``train.lrs`` gives one rate per model.
    """
    if train.pipeline is Pipeline.stale:
        _check(
            train.models in (None, 1),
            f"train.models={train.models} needs train.pipeline=interleaved (a stale "
            "pipeline trains one model); set train.pipeline=interleaved or train.models=null.",
        )
        models = 1
    else:
        models = T + 1 if train.models is None else train.models
        _check(
            models >= T + 1,
            f"train.models={train.models} is invalid for a scheme with T={T}: interleaved "
            f"models are exact SGD only if there are at least T+1={T + 1} of them (a model's "
            "previous job must be applied before its next starts).",
        )
    lrs = [train.lr] * models if train.lrs is None else list(train.lrs)
    _check(
        len(lrs) == models,
        f"train.lrs={list(lrs)} names {len(lrs)} learning rates for {models} model(s); give "
        f"one per model ({models}), or null for train.lr each.",
    )
    _check(
        all(0 < lr < math.inf for lr in lrs),
        f"train.lrs={list(lrs)} is invalid: every learning rate must be a finite number > 0.",
    )
    return models, lrs


def build(cfg: DictConfig):
    """Validate the config and build the run's parts; no Ray, no files written.

    Returns ``(plan, logger)``; raises :class:`ConfigError` on any bad value.
    """
    from gclab.runtime.server import TrainingPlan

    validate_train(cfg.train)
    cluster = instantiate_checked(cfg.cluster)
    scheme = instantiate_scheme(cfg)
    batch = cfg.train.batch_size
    _check(
        batch % scheme.k == 0,
        f"train.batch_size={batch} is not divisible by the {scheme.k} data shards of "
        f"{scheme.describe()}; use a multiple of {scheme.k}, "
        f"e.g. {_nearest_multiples(batch, scheme.k)}.",
    )
    delay = instantiate_checked(cfg.delay)
    with under("network"):
        network = NetworkConfig(**OmegaConf.to_container(cfg.network))  # validates the ranges
        check_recovery(scheme, network)
    cluster.check(network)
    logger = instantiate_checked(cfg.logger)
    source = instantiate_checked(cfg.data)
    with under("data"):
        data = source.load()
    classes = cfg.model.num_classes
    _check(
        classes is None or classes == data.num_classes,
        f"model.num_classes={classes} does not match the {data.num_classes} classes of the "
        f"training data; leave it unset (null) and the model follows the data.",
    )
    subset = cfg.train.eval_subset
    _check(
        subset is None or subset <= len(data.test_y),
        f"train.eval_subset={subset} exceeds the {len(data.test_y)} test images; use at most "
        f"{len(data.test_y)} (or null for the whole test set).",
    )
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg["num_classes"] = data.num_classes
    model = instantiate_checked(cfg.model, num_classes=data.num_classes)  # fails before Ray
    payload = 4 * sum(p.numel() for p in model.parameters())  # a float32 gradient's bytes
    shard = len(data.train_y) // scheme.k
    per_shard = batch // scheme.k
    _check(
        shard >= 1,
        f"the training set has {len(data.train_y)} samples, fewer than the {scheme.k} data "
        f"shards of {scheme.describe()}; use more data or fewer workers.",
    )
    _check(
        per_shard <= shard,
        f"train.batch_size={batch} needs {per_shard} samples from each of {scheme.k} shards, "
        f"but a shard holds only {shard}; use a batch of at most {shard * scheme.k}.",
    )
    steps_per_epoch = shard // per_shard
    jobs = cfg.train.rounds or math.ceil(cfg.train.epochs * steps_per_epoch)
    with under("delay"):
        delay.check(scheme.n, jobs + scheme.T)
    protocol = RoundProtocol(network, delay, scheme.n, cfg.seed, payload=payload)
    jobs_key = "train.rounds" if cfg.train.rounds else "train.epochs"
    adaptive = controller(cfg, scheme, delay, network, payload, jobs, jobs_key)
    if adaptive is not None:
        require_static(adaptive.nodes, scheme.n)

    models, lrs = interleaving(cfg.train, scheme.T)

    def build_optimizer(flat, lr: float | None = None):
        t = cfg.train
        return make_optimizer(
            flat.model.parameters(), t.lr if lr is None else lr, t.momentum, t.nesterov,
            t.weight_decay, t.schedule, jobs,
        )  # fmt: skip

    plan = TrainingPlan(
        scheme=scheme,
        model_cfg=model_cfg,
        build_optimizer=build_optimizer,
        data=data,
        augment=source.augment,
        batch_size=batch,
        num_jobs=jobs,
        eval_every=cfg.train.eval_every,
        stop_at_target=cfg.train.stop_at_target,
        time_budget=cfg.train.time_budget,
        eval_subset=None if subset is None else subset_indices(len(data.test_y), subset),
        checkpoint_every=cfg.train.checkpoint_every,
        seed=cfg.seed,
        cluster=cluster,
        protocol=protocol,
        faults=Faults.parse(FaultConfig(**OmegaConf.to_container(cfg.faults)), scheme.n),
        resume=cfg.resume,
        models=models,
        lrs=lrs,
        confirm_target=cfg.train.confirm_target,
        stale_lr=cfg.train.stale_lr,
        adapt=adaptive,
    )
    return plan, logger


def run(
    cfg: DictConfig,
    run_dir: Path,
    name: str | None = None,
    group: str | None = None,
    tags: list[str] | None = None,
    start_pool: PoolFactory | None = None,
) -> dict:
    """Train one configured run into ``run_dir``, holding its lock; returns the summary.

    ``start_pool`` starts the workers (default: Ray actors, see
    :func:`gclab.runtime.server.train`).
    """
    plan, logger = build(cfg)  # bad input fails before the directory is touched
    with held(run_dir, f"the run directory {run_dir}", lambda: check_run_dir(cfg, run_dir)):
        return _run(cfg, run_dir, plan, logger, name, group, tags, start_pool)


def _run(
    cfg: DictConfig,
    run_dir: Path,
    plan: TrainingPlan,
    logger: Logger,
    name: str | None,
    group: str | None,
    tags: list[str] | None,
    start_pool: PoolFactory | None,
) -> dict:
    from gclab.runtime.server import train
    from gclab.tracking.provenance import code_version
    from gclab.tracking.run import RunRecorder

    run_dir.mkdir(parents=True, exist_ok=True)
    extra = {
        "scheme": plan.scheme.name, "load": plan.scheme.load, "n": plan.scheme.n,
        "loss_rate": plan.protocol.delay.loss_rate, "num_jobs": plan.num_jobs,
        "time_budget": plan.time_budget, "eval_subset": cfg.train.eval_subset,
        "payload_bytes": plan.protocol.links.payload,  # what a replay's links need
        "models": plan.models, "commit": code_version(),
    }  # fmt: skip

    def record() -> RunRecorder:
        recorder = RunRecorder(
            run_dir, logger, cfg.train.target_accuracy, extra, config_text(cfg),
            checkpointed=cfg.train.checkpoint_every > 0,
        )  # fmt: skip
        logger.start(
            OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True),
            run_dir,
            name or plan.scheme.describe(),
            group,
            tags or [],
            resume=cfg.resume,
        )
        return recorder

    return train(plan, record, start_pool)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    """Hydra's task function. In a sweep, a failing job is recorded and the sweep goes on.

    A run stopped from outside (:mod:`gclab.rundir.interrupts`) records the sentence that says
    how to resume it and ends the process (a sweep too).
    """
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode.name == "MULTIRUN"
    choices = hydra_cfg.runtime.choices
    tags = [f"{group}:{choices[group]}" for group in ("scheme", "delay", "model", "data")]
    try:
        summary = run(
            cfg,
            run_dir,
            name=hydra_cfg.job.override_dirname or None,
            group=str(Path(hydra_cfg.sweep.dir)) if multirun else None,
            tags=tags,
        )
    except (Stop, Exception) as exc:
        stop = stop_of(exc)
        if stop is None:
            return _failed(exc, run_dir, multirun, hydra_cfg.job.num if multirun else None)
        stop.reason = stopped_sentence(stop.reason, run_dir, list(hydra_cfg.overrides.task))
        (run_dir / "error.txt").write_text(stop.reason + "\n", encoding="utf-8")
        raise stop from None
    log.info("summary: %s", summary)
    return summary.get("test_accuracy")


def _failed(exc: Exception, run_dir: Path, multirun: bool, job: int | None) -> None:
    """Record a failed run in its error.txt; bad input is one line, a bug its traceback.

    In a sweep the failure is reported and the other jobs go on.
    """
    message = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, DirectoryInUse):  # the directory is another process's
        (run_dir / "error.txt").write_text(message + "\n", encoding="utf-8")
    if not isinstance(exc, ConfigError):
        if not multirun:
            raise exc  # a bug or the environment: its traceback (exit code 1)
        log.exception("job %s failed", job, exc_info=exc)
    elif not multirun:
        fail(PREFIX, message)
    else:
        print(f"{PREFIX}{message}", file=sys.stderr)


def main() -> None:
    """``python -m gclab``: bad input exits 2 with one line, a run stopped from outside
    exits with its own code and one line (:mod:`gclab.rundir.interrupts`), anything else shows
    its traceback. Whatever ends it, the run directory's lock is let go, and a refusal
    leaves it as it was found (:func:`gclab.rundir.lock.released`)."""
    with handled(), released():
        run_app(_hydra_main, "config")
