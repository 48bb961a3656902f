"""The training app's config schema, and the schemas of its torch and Ray groups.

Importing this module registers, in Hydra's ConfigStore, the root schema
``config_schema`` (extended by ``gclab/conf/config.yaml``) and the schema of every
option of the ``data``, ``model``, ``cluster`` and ``logger`` groups, derived from the
constructors (:func:`gclab.schemas.register`); :mod:`gclab.schemas` adds the
``scheme`` and ``delay`` groups and :mod:`gclab.adapt.options` the ``adapt`` group, which
the simulator shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

import gclab.adapt.options  # noqa: F401  (the adapt options' schemas)
from gclab.ml.data import CIFAR10Data, ImageFolderData, SyntheticData
from gclab.ml.models import SmallCNN, resnet18_cifar
from gclab.ml.optim import Schedule, StaleLR
from gclab.network.protocol import MEASURED, NetworkConfig
from gclab.runtime.cluster import Cluster
from gclab.runtime.faults import FaultConfig
from gclab.runtime.netns import NetnsCluster
from gclab.schemas import register
from gclab.tracking.loggers import Logger, WandbLogger


class Pipeline(Enum):
    """How jobs of a scheme with T > 0 map to models (docs/design.md, architecture)."""

    stale = "stale"  # one model; job t uses the newest weights (staleness <= T)
    interleaved = "interleaved"  # train.models (>= T+1) models in turn, each exact SGD


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
    time_budget: float | None = None  # virtual seconds; the run ends once its clock passes it
    eval_subset: int | None = None  # test images of the periodic evaluations (null: all of them)
    checkpoint_every: int = 100  # rounds between checkpoints (and at the end); 0 = never
    pipeline: Pipeline = Pipeline.stale
    stale_lr: StaleLR = StaleLR.constant  # weight of a gradient tau updates stale: 1 or 1/(1+tau)
    # pipeline=interleaved: models trained in turn, job t on model t mod models (null: T+1);
    # any scheme takes them in turn, so every arm of a comparison trains the same models
    models: int | None = None
    lrs: list[float] | None = None  # one learning rate per model (null: train.lr for each)
    # a periodic evaluation on eval_subset at or above the target is repeated on the whole
    # test set at once, and only whole-set evaluations mark the target reached
    confirm_target: bool = False


@dataclass
class Config:
    seed: int = 0
    resume: bool = False  # continue from checkpoint.pt in hydra.run.dir
    train: TrainConfig = field(default_factory=TrainConfig)
    # training charges the server's measured decode and optimizer step to the clock
    network: NetworkConfig = field(default_factory=lambda: NetworkConfig(server_time=MEASURED))
    faults: FaultConfig = field(default_factory=FaultConfig)  # injected faults (robustness studies)
    scheme: Any = MISSING
    model: Any = MISSING
    data: Any = MISSING
    cluster: Any = MISSING
    delay: Any = MISSING
    adapt: Any = MISSING  # adaptive coding (gclab/adapt/options.py): off or search
    logger: Any = MISSING
    paths: Any = MISSING  # data, trace and output roots (gclab/conf/paths/default.yaml)


ConfigStore.instance().store(name="config_schema", node=Config)


register("data", "cifar10", CIFAR10Data)
register("data", "image_folder", ImageFolderData)
register("data", "synthetic", SyntheticData)
# num_classes: null is the data's number of classes (any other must match; gclab/app.py)
register("model", "cnn", SmallCNN, num_classes=None)
register("model", "resnet18", resnet18_cifar, num_classes=None)
register("cluster", "local", Cluster)
register("cluster", "ray", Cluster)
register("cluster", "netns", NetnsCluster, base=Cluster)
register("logger", "none", Logger)
register("logger", "wandb", WandbLogger)
