"""Helpers shared by the benchmark scripts: data, configs, step timing, memory, machine."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig

import gclab.app
from gclab import CONF_DIR
from gclab.ml.reference import train_single_process
from gclab.runtime.server import TrainingPlan

SHARED = Path(__file__).resolve().parents[2] / "shared"
CACHE = Path.home() / ".cache" / "gclab" / "shared-cifar10"


def shared_cifar() -> Path | None:
    """The shared CIFAR-10 as an ImageFolder tree (written once), or None if absent."""
    script = SHARED / "data" / "make_cifar10.py"
    if (CACHE / "test").is_dir():
        return CACHE
    if not script.is_file():
        return None
    subprocess.run([sys.executable, str(script), str(CACHE)], check=True)
    return CACHE


def data_overrides(quick: bool) -> list[str]:
    """Shared CIFAR-10 when present (else synthetic, said loudly); synthetic in quick mode.

    Quick mode skips loading 60k images and evaluating on 10k, which alone take a good
    part of a minute on a loaded 2-core machine.
    """
    root = None if quick else shared_cifar()
    if root is None:
        if not quick:
            print(f"# shared CIFAR-10 not found under {SHARED}/data: using data=synthetic")
        return ["data=synthetic", "data.train_size=8192", "data.test_size=2048"]
    return ["data=image_folder", f"data.root={root}"]


def compose_config(overrides: list[str]) -> DictConfig:
    """The composed gclab config for ``overrides`` (as ``python -m gclab`` would build it)."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


class StepClock:
    """Timestamps of the optimizer steps of every run built while it is installed.

    The plain loop and gclab both build their optimizer through ``gclab.app``'s
    ``make_optimizer``, and both call the scheduler's ``step`` right after each
    optimizer step, so wrapping the scheduler times both the same way: steady-state
    seconds per step, without start-up (data loading, Ray, actors) or the first,
    warm-up step. The wrapper forwards everything to the real scheduler (if any).
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self.cpu: list[float] = []  # CPU seconds of the process tree at each step

    def reset(self) -> None:
        self.times.clear()
        self.cpu.clear()

    @property
    def steps(self) -> int:
        return len(self.times)

    def seconds_per_step(self) -> float:
        """Mean step period after the first step (needs two steps or more)."""
        return self._per_step(self.times)

    def cpu_seconds_per_step(self) -> float:
        """CPU seconds of this process and its descendants per step, after the first."""
        return self._per_step(self.cpu)

    def _per_step(self, values: list[float]) -> float:
        if len(values) < 2:
            raise ValueError("time at least 2 steps: the first one is warm-up")
        return (values[-1] - values[0]) / (len(values) - 1)

    def record(self) -> None:
        """Stamp one step: wall clock, then the tree's CPU time (about 1 ms of /proc)."""
        self.times.append(time.perf_counter())
        self.cpu.append(tree_cpu_seconds())

    @contextmanager
    def installed(self) -> Iterator[StepClock]:
        original = gclab.app.make_optimizer

        def clocked(*args: Any, **kwargs: Any) -> tuple[Any, _ClockedScheduler]:
            optimizer, scheduler = original(*args, **kwargs)
            return optimizer, _ClockedScheduler(scheduler, self)

        gclab.app.make_optimizer = clocked
        try:
            yield self
        finally:
            gclab.app.make_optimizer = original


class _ClockedScheduler:
    """Records a timestamp per step and forwards to the wrapped scheduler (or none)."""

    def __init__(self, inner: Any, clock: StepClock) -> None:
        self.inner, self.clock = inner, clock

    def step(self) -> None:
        self.clock.record()
        if self.inner is not None:
            self.inner.step()

    def state_dict(self) -> dict:
        return self.inner.state_dict() if self.inner is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.inner is not None:
            self.inner.load_state_dict(state)


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB from /proc/<pid>/smaps_rollup; (0, 0) if gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return rss, pss


TICK = os.sysconf("SC_CLK_TCK")


def _process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used so far) of every process, from /proc/*/stat."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    return table


def descendants(pid: int, table: dict[int, tuple[int, float]] | None = None) -> list[int]:
    """``pid`` and every process below it (Ray's GCS, raylet and workers of a local Ray)."""
    children: dict[int, list[int]] = {}
    for child, (parent, _) in (table or _process_table()).items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def tree_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and its descendants.

    Unlike wall time, this barely moves when other jobs load the machine: it is the
    work done, whoever had to wait for a core.
    """
    table = _process_table()
    return sum(table[p][1] for p in descendants(os.getpid(), table))


@dataclass
class MemoryPeak:
    """Peaks over a run, in GiB, of the summed RSS and PSS of this process tree, and of
    the summed RSS of this process (the driver) and gclab's worker actors alone."""

    rss_gib: float = 0.0
    pss_gib: float = 0.0
    processes: int = 0
    samples: int = 0
    workers_rss_gib: float = 0.0


def _is_worker_actor(pid: int) -> bool:
    """Whether ``pid`` is a gclab worker actor (Ray titles it ``ray::RayWorkerHost...``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().startswith(b"ray::RayWorkerHost")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


class MemorySampler:
    """Samples Σ RSS and Σ PSS of this process and its descendants in a thread.

    Σ RSS counts pages shared between processes (the Ray object store, torch's
    libraries) once per process that maps them; Σ PSS splits each shared page among
    its users, so it is the machine's real footprint. Both are reported. An infinite
    ``interval`` samples only on entry and exit.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.peak = MemoryPeak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        pids = descendants(os.getpid())
        sizes = [_memory_kib(p) for p in pids]
        rss, pss = (sum(s[i] for s in sizes) / 2**20 for i in (0, 1))
        workers = sum(s[0] for p, s in zip(pids, sizes) if p == os.getpid() or _is_worker_actor(p))
        peak = self.peak
        peak.samples += 1
        if rss > peak.rss_gib:
            peak.rss_gib, peak.processes = rss, len(pids)
        peak.pss_gib = max(peak.pss_gib, pss)
        peak.workers_rss_gib = max(peak.workers_rss_gib, workers / 2**20)

    def _run(self) -> None:
        timeout = None if math.isinf(self.interval) else self.interval
        while not self._stop.wait(timeout):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class Measured:
    """A gclab run as the benchmarks see it."""

    summary: dict
    rounds: list[dict]  # the round records of metrics.jsonl
    steps: int
    period: float  # seconds per optimizer step after the first (steady state)
    cpu: float  # CPU seconds per step of the driver and all Ray processes, likewise
    startup: float  # seconds from the call to the first step (data, Ray, actors, round 0)
    memory: MemoryPeak


def measured_run(cfg: DictConfig, memory: bool = True) -> Measured:
    """Run ``cfg`` with gclab (in a temporary run directory), timing steps and memory.

    Ray is shut down afterwards, so that every run starts its own workers and idle
    processes of one run neither use the CPUs nor count in the memory of the next.
    ``ray.init`` done by the caller before (as memory.py does) is reused by the run.
    ``memory=False`` leaves the sampler thread out (it costs the driver some CPU).
    """
    import ray

    clock = StepClock()
    sampler = MemorySampler(interval=0.25 if memory else math.inf)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp, clock.installed(), sampler:
            summary = gclab.app.run(cfg, Path(tmp))
            lines = (Path(tmp) / "metrics.jsonl").read_text().splitlines()
    finally:
        ray.shutdown()
    rounds = [r for r in map(json.loads, lines) if r["kind"] == "round"]
    return Measured(
        summary, rounds, clock.steps, clock.seconds_per_step(), clock.cpu_seconds_per_step(),
        clock.times[0] - start, sampler.peak,
    )  # fmt: skip


def plain_run(plan: TrainingPlan, clock: StepClock, device: str = "cpu") -> torch.nn.Module:
    """Plain single-process SGD (:func:`gclab.ml.reference.train_single_process`) on the
    global batches of ``plan``, from the same initial weights, its steps timed by ``clock``
    (reset first); returns the trained model."""
    clock.reset()
    torch.manual_seed(plan.seed)
    model = instantiate(plan.model_cfg)
    with clock.installed():
        train_single_process(
            model, plan.data, plan.scheme.k, plan.batch_size, plan.num_jobs, plan.seed,
            plan.augment, plan.build_optimizer, device=device,
        )  # fmt: skip
    return model


def machine() -> str:
    """One line on where a benchmark ran: CPU model, cores, RAM, load, torch and Ray."""
    import ray
    import torch

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{model}, {os.cpu_count()} cores, {ram:.0f} GiB RAM, load average {load} at start; "
        f"torch {torch.__version__}, ray {ray.__version__}"
    )
