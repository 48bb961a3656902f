"""How a logical worker's compute time is measured for the virtual clock.

The virtual clock needs what a worker would take *on its own core or device*, not how
long the OS scheduler let it run: with more busy processes than cores, wall time
measures the machine's oversubscription, and packing would change the result. The rule:

* ``cpu`` (the default for CPU workers with one torch thread): the CPU time of the
  thread that runs the worker (``time.thread_time``). With one intra-op thread, torch
  runs the forward pass, the backward pass (the autograd engine works on the calling
  thread for CPU tensors) and the encoding all on that thread, so its CPU time is the
  worker's whole compute, and time spent waiting for a core is not counted.
* ``cuda`` (the default on a GPU): the GPU time of each weight load and task, its
  gradient's copy to the host included (CUDA events on the current stream around it),
  plus the thread's CPU time for encoding the packet on the host afterwards. The tasks
  of an actor's logical workers run one after another on its GPU, so each span times
  only its own kernels; actors sharing one GPU interleave their kernels and each sees
  the others' in its span, which is why the default packs one actor per GPU.
* ``wall`` (``time.perf_counter``): elapsed time. The only faithful choice for a
  worker with several torch threads (``cluster.threads_per_actor > 1``): process CPU
  time would add every thread's time, spin-waiting included, and dividing it by the
  thread count assumes perfect scaling. Wall time is faithful only when each actor's
  threads have cores of their own, which the default ``cluster.actors`` arranges.
"""

from __future__ import annotations

import platform
import time
from enum import Enum, StrEnum
from pathlib import Path

import torch

from gclab.errors import ConfigError


class ComputeTime(Enum):
    """The measure of a logical worker's compute time (``cluster.compute_time``)."""

    cpu = "cpu"
    cuda = "cuda"
    wall = "wall"


class ComputeTimeSetting(StrEnum):
    """``cluster.compute_time``: a :class:`ComputeTime`, or ``auto`` (the rule above)."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"
    wall = "wall"


def resolve(setting: ComputeTimeSetting, device: str, threads: int) -> ComputeTime:
    """``cluster.compute_time`` for workers on ``device`` with ``threads`` torch threads.

    ``auto`` follows the rule above; a measure that cannot be faithful is refused.
    """
    if setting == "auto":
        if device == "cuda":
            return ComputeTime.cuda
        return ComputeTime.cpu if threads == 1 else ComputeTime.wall
    measure = ComputeTime(setting)
    if measure is ComputeTime.cuda and device != "cuda":
        raise ConfigError(
            "compute_time=cuda times GPU work, but the workers compute on the CPU; "
            "use compute_time=auto, cpu or wall, or put the workers on a GPU.",
            param="compute_time",
        )
    if measure is ComputeTime.cpu and device == "cuda":
        raise ConfigError(
            "compute_time=cpu would miss the GPU work of workers on cuda; use "
            "compute_time=auto (cuda) or wall.",
            param="compute_time",
        )
    if measure is ComputeTime.cpu and threads > 1:
        raise ConfigError(
            f"compute_time=cpu measures one thread's CPU time, but "
            f"threads_per_actor={threads}; use compute_time=wall (or auto) with "
            "several threads, or threads_per_actor=1.",
            param="compute_time",
        )
    return measure


def processor(device: str = "cpu") -> str:
    """What a worker's compute time is measured on: the GPU's name, or the CPU's model and
    the instruction set torch's kernels use on it (``AVX2``, ``AVX512``, ...). Both set the
    compute times of the virtual clock, and the kernels also set the float rounding, so
    runs on different processors differ in time and (by rounding) in trajectory."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"{_cpu_model()} ({torch.backends.cpu.get_cpu_capability()})"


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine() or "unknown CPU"


class Stopwatch:
    """Times one piece of a logical worker's round (a weight load, a task, an encoding):
    :meth:`start`, :meth:`host_part`, :meth:`stop`.

    ``host_part`` marks the end of the work queued on the device (a no-op on the CPU):
    for ``cuda`` it waits for the device and starts counting host CPU time.
    """

    def __init__(self, measure: ComputeTime) -> None:
        self.measure = measure
        self._device_seconds = 0.0
        self._host_start = 0.0
        if measure is ComputeTime.cuda:
            self._events = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )

    def _now(self) -> float:
        return time.perf_counter() if self.measure is ComputeTime.wall else time.thread_time()

    def start(self) -> None:
        self._device_seconds = 0.0
        if self.measure is ComputeTime.cuda:
            self._events[0].record()
        self._host_start = self._now()

    def host_part(self) -> None:
        """The device's work is queued: wait for it; from here on the host computes."""
        if self.measure is ComputeTime.cuda:
            begin, end = self._events
            end.record()
            end.synchronize()
            self._device_seconds = begin.elapsed_time(end) / 1e3  # milliseconds
            self._host_start = self._now()

    def stop(self) -> float:
        """Seconds of compute since :meth:`start`."""
        return self._device_seconds + self._now() - self._host_start
