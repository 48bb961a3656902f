"""Composition root of ``python -m gclab``: validate, instantiate, train, record.

Everything that can be wrong with a config is found here, before Ray starts, and
reported as one sentence (``ConfigError``); nothing is written for a rejected run.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

import gclab.config  # noqa: F401  (registers every schema in Hydra's ConfigStore)
from gclab import CONF_DIR
from gclab.config import Pipeline
from gclab.errors import ConfigError
from gclab.ml.optim import make_optimizer
from gclab.network.protocol import NetworkConfig, RoundProtocol
from gclab.network.wallclock import WallClockProtocol
from gclab.runtime.faults import FaultConfig, Faults
from gclab.schemas import instantiate_checked
from gclab.tracking.artifacts import load_checkpoint

log = logging.getLogger("gclab")


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


def build(cfg: DictConfig):
    """Validate the config and build the run's parts; no Ray, no files written.

    Returns ``(plan, logger)``; raises :class:`ConfigError` on any bad value.
    """
    from gclab.runtime.server import TrainingPlan

    validate_train(cfg.train)
    instantiate_checked(cfg.model)  # dropped: built only so that a bad model.* fails before Ray
    cluster = instantiate_checked(cfg.cluster)
    scheme = instantiate_checked(cfg.scheme, n=cluster.workers)
    batch = cfg.train.batch_size
    _check(
        batch % scheme.k == 0,
        f"train.batch_size={batch} is not divisible by the {scheme.k} data shards of "
        f"{scheme.describe()}; use a multiple of {scheme.k}, "
        f"e.g. {_nearest_multiples(batch, scheme.k)}.",
    )
    delay = instantiate_checked(cfg.delay)
    network = NetworkConfig(**OmegaConf.to_container(cfg.network))  # validates the ranges
    logger = instantiate_checked(cfg.logger)
    source = instantiate_checked(cfg.data)
    data = source.load()
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
    delay.check(scheme.n, jobs + scheme.T)
    protocol_class = WallClockProtocol if network.clock == "wall" else RoundProtocol
    protocol = protocol_class(network, delay, scheme.n, cfg.seed)
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg["num_classes"] = data.num_classes

    def build_optimizer(flat):
        t = cfg.train
        return make_optimizer(
            flat.model.parameters(), t.lr, t.momentum, t.nesterov, t.weight_decay,
            t.schedule, jobs,
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
        checkpoint_every=cfg.train.checkpoint_every,
        seed=cfg.seed,
        cluster=cluster,
        protocol=protocol,
        faults=Faults.parse(FaultConfig(**OmegaConf.to_container(cfg.faults)), scheme.n),
        resume=cfg.resume,
        models=scheme.T + 1 if cfg.train.pipeline is Pipeline.interleaved else 1,
        stale_lr=cfg.train.stale_lr,
    )
    return plan, logger


def config_text(cfg: DictConfig) -> str:
    """The parts of a config that must not change when a run is resumed, as YAML."""
    keep = {k: v for k, v in cfg.items() if k not in ("resume", "logger", "faults")}
    return OmegaConf.to_yaml(OmegaConf.create(keep), resolve=True)


def check_resume(cfg: DictConfig, run_dir: Path, scheme_T: int) -> None:
    """``resume=true`` needs a checkpoint of the same config, and a T=0 scheme."""
    path = run_dir / "checkpoint.pt"
    _check(
        path.is_file(),
        f"resume=true but {path} does not exist; point hydra.run.dir at the run directory "
        "to continue (its checkpoint.pt), or drop resume.",
    )
    _check(
        scheme_T == 0,
        f"resume=true needs a scheme with T=0 (its decoder holds no state between rounds); "
        f"this scheme has T={scheme_T}.",
    )
    try:
        saved = load_checkpoint(path).get("config")
    except Exception as exc:  # arbitrary bytes make the unpickler raise almost anything
        raise ConfigError(  # torch's own message suggests weights_only=False: unsafe advice
            f"resume=true but {path} is not a readable gclab checkpoint ({type(exc).__name__}); "
            "it may be truncated or from another program: restore it or drop resume."
        ) from None
    _check(
        saved == config_text(cfg),
        f"resume=true but the config differs from the one that wrote {path}; resume with "
        "the same overrides (compare with .hydra/overrides.yaml).",
    )


def run(
    cfg: DictConfig,
    run_dir: Path,
    name: str | None = None,
    group: str | None = None,
    tags: list[str] | None = None,
) -> dict:
    """Train one configured run into ``run_dir``; returns the summary."""
    from gclab.runtime.server import train
    from gclab.tracking.run import RunRecorder

    plan, logger = build(cfg)
    if cfg.resume:
        check_resume(cfg, run_dir, plan.scheme.T)
    run_dir.mkdir(parents=True, exist_ok=True)
    extra = {
        "scheme": plan.scheme.name, "load": plan.scheme.load, "n": plan.scheme.n,
        "num_jobs": plan.num_jobs,
    }  # fmt: skip
    recorder = RunRecorder(run_dir, logger, cfg.train.target_accuracy, extra, config_text(cfg))
    logger.start(
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True),
        run_dir,
        name or plan.scheme.describe(),
        group,
        tags or [],
    )
    summary = None
    try:
        summary = train(plan, recorder)
        return summary
    finally:
        recorder.close(summary, failed=summary is None)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Hydra entry point. In a sweep, a failing job is recorded and the sweep goes on."""
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
    except Exception as exc:
        message = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        (run_dir / "error.txt").write_text(message + "\n", encoding="utf-8")
        if multirun:  # report and let the sweep's other jobs run
            log.error("job %s failed: %s", hydra_cfg.job.num, message)
            print(f"gclab: error: {message}", file=sys.stderr)
            return None
        if isinstance(exc, ConfigError):
            print(f"gclab: error: {message}", file=sys.stderr)
            sys.exit(2)
        raise
    log.info("summary: %s", summary)
    return summary.get("test_accuracy")
