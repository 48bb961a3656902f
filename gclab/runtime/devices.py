"""Where the workers and the parameter server compute (``cluster.device``, ``server_device``).

``auto`` puts the workers on a GPU when they reserve one (``cluster.worker_gpus > 0``;
Ray shows an actor only the GPUs it reserved, and fractions let several actors share
one) and the server on a GPU when the workers use one and the driver sees one. Asking
for a GPU that is not there fails in one sentence before Ray starts: on a private local
Ray the machine's GPUs are all there will be. Joining a cluster by address, the check
waits until Ray answers (:meth:`gclab.runtime.cluster.Cluster.connect`).
"""

from __future__ import annotations

from enum import StrEnum

import ray
import torch

from gclab.errors import ConfigError


class DeviceSetting(StrEnum):
    """``cluster.device`` and ``cluster.server_device``."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def visible_gpus() -> float:
    """GPUs for actors: the Ray cluster's once connected, else the ones torch sees here."""
    if ray.is_initialized():
        return ray.cluster_resources().get("GPU", 0.0)
    return float(torch.cuda.device_count())


def worker_device(setting: DeviceSetting, worker_gpus: float, check_visible: bool) -> str:
    """``cpu`` or ``cuda`` for the workers; ``check_visible``: refuse GPUs nobody has.

    Ray's GPUs are known before Ray starts when it will run on this machine only, and
    once it answers when it is a cluster joined by address.
    """
    if setting == "cpu" and worker_gpus > 0:
        raise ConfigError(
            f"worker_gpus={worker_gpus} reserves GPUs that device=cpu never "
            "uses; use device=auto or cuda, or worker_gpus=0.",
            param="worker_gpus",
        )
    if setting == "cuda" and worker_gpus == 0:
        raise ConfigError(
            "device=cuda needs worker_gpus > 0 (Ray shows an actor only the "
            "GPUs it reserves): e.g. worker_gpus=1, or 0.25 for four actors per GPU.",
            param="device",
        )
    device = "cuda" if worker_gpus > 0 else "cpu"
    if device == "cuda" and check_visible and visible_gpus() == 0:
        raise ConfigError(  # the actors would wait for a GPU forever
            f"device={setting} with worker_gpus={worker_gpus} needs a GPU, "
            "but none is visible (CUDA_VISIBLE_DEVICES, drivers); use device=cpu "
            "and worker_gpus=0 here.",
            param="device",
        )
    return device


def server_device(setting: DeviceSetting, workers: str) -> str:
    """``cpu`` or ``cuda`` for the parameter server (optimizer steps, evaluation)."""
    has_gpu = torch.cuda.is_available()
    if setting == "cuda" and not has_gpu:
        raise ConfigError(
            "server_device=cuda but this process sees no GPU; use server_device=cpu or auto.",
            param="server_device",
        )
    if setting == "auto":
        return "cuda" if workers == "cuda" and has_gpu else "cpu"
    return str(setting)
