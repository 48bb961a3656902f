"""The top-level config schema, and the registry of every group's schemas.

Importing this module registers, in Hydra's ConfigStore, the root schema
``config_schema`` (extended by ``gclab/conf/config.yaml``) and the per-option schemas that
each configurable module declares next to its class (``gclab.schemas.register``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

import gclab.coding
import gclab.ml.data
import gclab.ml.models
import gclab.network
import gclab.runtime.cluster
import gclab.tracking.loggers  # noqa: F401
from gclab.ml.optim import Schedule, StaleLR
from gclab.network.protocol import NetworkConfig
from gclab.runtime.faults import FaultConfig


class Pipeline(Enum):
    """How jobs of a scheme with T > 0 map to models (DESIGN.md, training semantics)."""

    stale = "stale"  # one model; job t uses the newest weights (staleness <= T)
    interleaved = "interleaved"  # T+1 models round-robin, each exact synchronous SGD


@dataclass
class TrainConfig:
    epochs: float = 1.0
    rounds: int | None = None  # number of jobs (SGD steps); overrides epochs when set
    batch_size: int = 128
    lr: float = 0.05
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 5e-4
    schedule: Schedule = Schedule.constant
    eval_every: int = 50  # rounds between test-set evaluations; 0 = never
    target_accuracy: float | None = None
    stop_at_target: bool = False  # end the run at the first evaluation >= target_accuracy
    checkpoint_every: int = 100  # rounds between checkpoints (and at the end); 0 = never
    pipeline: Pipeline = Pipeline.stale
    stale_lr: StaleLR = StaleLR.constant  # weight of a gradient tau updates stale: 1 or 1/(1+tau)


@dataclass
class Config:
    seed: int = 0
    resume: bool = False  # continue from checkpoint.pt in hydra.run.dir
    train: TrainConfig = field(default_factory=TrainConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)  # injected faults (robustness studies)
    scheme: Any = MISSING
    model: Any = MISSING
    data: Any = MISSING
    cluster: Any = MISSING
    delay: Any = MISSING
    logger: Any = MISSING


ConfigStore.instance().store(name="config_schema", node=Config)
