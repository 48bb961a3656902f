"""Reading a Hydra sweep folder: one :class:`Run` per job directory.

A job directory holds ``.hydra/{config,hydra,overrides}.yaml`` (written before the job
starts) and, once the job has finished, ``summary.json``; a training run also leaves
``metrics.jsonl``, a simulator run ``rounds.csv``. A job without a readable
``summary.json`` failed (or is still running). It is kept, with the first line of its
``error.txt`` when the app wrote one, so that a report never silently drops a run.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

TRAIN, SIM, UNKNOWN = "train", "sim", "unknown"
#: ``hydra.job.name`` of each app, to tell a failed job's kind when no output file says it.
JOB_NAMES = {"gclab": TRAIN, "gclab.sim": SIM}
#: Overrides that never tell curves or categories apart.
NOT_SERIES = ("seed", "resume")


class SweepError(Exception):
    """The path is not a Hydra sweep folder (the message says what it is instead)."""


def _number(value: Any) -> float | None:
    """A finite float, or None for null, NaN, text and unresolved interpolations."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def config_loss_rate(config: Any) -> float | None:
    """The loss rate of the delay model a run's config builds, for a run whose summary
    does not record it (a failed run, or one from before summaries recorded it).

    The model answers (:attr:`gclab.network.base.DelayModel.loss_rate`), built from the
    config as the run built it; one that cannot be built here (a trace file gone, an
    unresolvable value) answers through its class where the class states one rate for
    every parameter (a model that never loses a packet: 0). None when neither can.
    """
    delay = config.get("delay") if isinstance(config, Mapping) else None
    if not isinstance(delay, Mapping):
        return None
    from hydra.utils import get_class

    from gclab.schemas import instantiate_checked

    try:
        return _number(instantiate_checked(OmegaConf.create(dict(config)).delay).loss_rate)
    except Exception:  # any config the model refuses or cannot resolve: ask its class
        pass
    try:
        cls = get_class(str(delay.get("_target_")))
    except Exception:  # no such class here
        return None
    return _number(inspect.getattr_static(cls, "loss_rate", None))


def is_loss_key(key: str) -> bool:
    """Whether an override sets the delay model or one of its parameters: the sweep's
    loss axis, when the runs span several loss rates (:meth:`Sweep.numeric_loss`)."""
    return key == "delay" or key.startswith(("delay.", "delay@"))


def parse_override(text: str) -> tuple[str, str]:
    """``'+scheme.s=2'`` -> ``('scheme.s', '2')``; a deletion ``'~key'`` has value ``''``."""
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; a torn line (a crash mid-write) is skipped."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _load_yaml(path: Path) -> Any:
    """A YAML file as plain containers, interpolations left as text (never resolved)."""
    if not path.is_file():
        return {}
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


@dataclass
class Run:
    """One job of a sweep: its overrides, config, outputs, or why it has none."""

    job: str  # the job directory, relative to the sweep folder
    path: Path
    num: int | None  # hydra.job.num
    overrides: dict[str, str]
    choices: dict[str, str]  # hydra.runtime.choices: config group -> option
    config: dict[str, Any]
    kind: str  # TRAIN, SIM or UNKNOWN
    summary: dict[str, Any] | None
    error: str | None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.summary is None

    @property
    def scheme(self) -> str:
        """The scheme's config option (``classic_cr``), else whatever the summary calls it."""
        return self.choices.get("scheme") or str((self.summary or {}).get("scheme", "?"))

    @cached_property
    def loss_rate(self) -> float | None:
        """The delay model's loss rate: as the summary records it, else from the config."""
        if self.summary is not None and "loss_rate" in self.summary:
            return _number(self.summary["loss_rate"])
        return config_loss_rate(self.config)

    @property
    def total_time(self) -> float | None:
        """Seconds on the virtual clock at the end (training and simulator alike)."""
        summary = self.summary or {}
        key = "total_virtual_time" if self.kind == TRAIN else "total_time"
        return _number(summary.get(key))

    def evaluations(self) -> tuple[np.ndarray, np.ndarray]:
        """``(virtual_time, test_accuracy)`` of every evaluation with both values."""
        points = self._evaluation_records()
        return (
            np.asarray([_number(r["virtual_time"]) for r in points]),
            np.asarray([_number(r["test_accuracy"]) for r in points]),
        )

    def jobs_at_evaluations(self) -> np.ndarray:
        """Jobs applied by each evaluation of :meth:`evaluations`."""
        return self.jobs_at(self._evaluation_records())

    def decisive_records(self) -> list[dict[str, Any]]:
        """The evaluations that can mark the target reached: every one, or for a run with
        ``train.confirm_target`` the whole-set ones (records' ``decisive``)."""
        return [r for r in self._evaluation_records() if r.get("decisive", True)]

    def model_accuracies(self, records: list[dict[str, Any]]) -> np.ndarray:
        """``[evaluations, models]``: each evaluation's accuracy of every model
        (``model_accuracy``; a one-model run's ``test_accuracy``)."""
        rows = [r.get("model_accuracy") or [r["test_accuracy"]] for r in records]
        width = max((len(row) for row in rows), default=1)
        return np.asarray([[_number(a) for a in row] for row in rows if len(row) == width])

    def jobs_at(self, records: list[dict[str, Any]]) -> np.ndarray:
        """Jobs applied by each of the evaluation ``records`` (the rounds' ``jobs_applied``
        summed up to the evaluation's round)."""
        rounds = sorted(
            (int(r["round"]), int(r.get("jobs_applied") or 0))
            for r in self.records
            if r.get("kind") == "round"
        )
        numbers = np.asarray([number for number, _ in rounds], dtype=int)
        applied = np.concatenate([[0], np.cumsum([count for _, count in rounds], dtype=int)])
        evaluated = np.asarray([int(r["round"]) for r in records], dtype=int)
        return applied[np.searchsorted(numbers, evaluated, side="right")]  # rounds <= its own

    def _evaluation_records(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.records
            if r.get("kind") == "eval"
            and _number(r.get("virtual_time")) is not None
            and _number(r.get("test_accuracy")) is not None
        ]

    def compute_median(self) -> float | None:
        """Median of the workers' measured compute seconds per round (``compute_s``): the
        machine's speed as the virtual clock saw it (None without such records)."""
        seconds = [
            value
            for r in self.records
            if r.get("kind") == "round"
            for value in (r.get("compute_s") or [])
            if _number(value) is not None
        ]
        return float(np.median(seconds)) if seconds else None

    @property
    def models(self) -> int:
        """The models the run trained: its summary's ``models``, else 1 or, interleaved,
        ``train.models`` or T+1."""
        recorded = (self.summary or {}).get("models")
        if recorded:
            return int(recorded)
        train = self.config.get("train") or {}
        if train.get("pipeline") != "interleaved":
            return 1
        scheme = self.config.get("scheme") or {}
        return int(train.get("models") or 1 + int(scheme.get("T") or 0))

    def staleness(self) -> np.ndarray:
        """Each applied job's staleness (:func:`staleness`), with this run's models."""
        return staleness(self.records, self.models)

    @property
    def values(self) -> dict[str, Any]:
        """The summary, and for a finished training run beside it ``compute_s_median``,
        ``stale_share`` (the share of updates with a stale gradient) and ``staleness_mean``."""
        if not self.summary:
            return {}
        if self.kind != TRAIN:
            return self.summary
        late = self.staleness()
        return {
            **self.summary,
            "compute_s_median": self.compute_median(),
            "stale_share": float(np.mean(late > 0)) if late.size else None,
            "staleness_mean": float(np.mean(late)) if late.size else None,
        }

    def decode_ms(self) -> np.ndarray:
        """Decode latency (ms) of the rounds that decoded a job (as the summary counts them)."""
        values = [
            _number(r.get("decode_ms"))
            for r in self.records
            if r.get("kind") == "round" and r.get("jobs_decoded", 1)
        ]
        return np.asarray([v for v in values if v is not None])


def staleness(records: list[dict[str, Any]], models: int = 1) -> np.ndarray:
    """Each applied job's staleness, from the rounds' ``jobs_applied``: the updates its
    model received between the broadcast its gradient was computed on and its own
    update (what ``train.stale_lr`` weighs, ``ParameterServer.staleness``).

    Job j starts in round j, on weights holding the A_j jobs applied in rounds before j,
    and is applied as update j + 1, so j − A_j updates late; with ``models`` interleaved
    models (T + 1) only every ``models``-th of those is its own model's. Always 0 with
    T = 0. Empty when rounds are missing from the records.
    """
    applied = dict(
        sorted(
            (int(r["round"]), int(r.get("jobs_applied") or 0))
            for r in records
            if r.get("kind") == "round"
        )
    )
    if list(applied) != list(range(len(applied))):
        return np.zeros(0, dtype=int)
    before = np.concatenate([[0], np.cumsum(list(applied.values()), dtype=int)])
    jobs = np.arange(before[-1])
    return (jobs - before[jobs]) // models


def _read_summary(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    file = path / "summary.json"
    if not file.is_file():
        return None, None
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return None, f"unreadable summary.json: {exc}"
    return (summary, None) if isinstance(summary, dict) else (None, "summary.json is not a dict")


def error_line(path: Path) -> str | None:
    """The first non-empty line of the job's ``error.txt``, if it wrote one."""
    file = path / "error.txt"
    if not file.is_file():
        return None
    lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    return next((line for line in lines if line), None)


def _kind(path: Path, summary: dict[str, Any] | None, job_name: Any) -> str:
    """Training or simulator run, by the files present, then the summary, then the job name."""
    if (path / "metrics.jsonl").is_file() or "total_virtual_time" in (summary or {}):
        return TRAIN
    if (path / "rounds.csv").is_file() or "total_time" in (summary or {}):
        return SIM
    return JOB_NAMES.get(str(job_name), UNKNOWN)


def load_run(sweep: Path, path: Path) -> Run:
    """Read one job directory; never raises for missing or broken outputs."""
    hydra = _load_yaml(path / ".hydra" / "hydra.yaml").get("hydra", {})
    job = hydra.get("job", {})
    summary, problem = _read_summary(path)
    num = job.get("num")
    return Run(
        job=path.relative_to(sweep).as_posix(),
        path=path,
        num=num if isinstance(num, int) else None,
        overrides=dict(
            parse_override(str(o)) for o in _load_yaml(path / ".hydra" / "overrides.yaml") or []
        ),
        choices={k: str(v) for k, v in hydra.get("runtime", {}).get("choices", {}).items()},
        config=_load_yaml(path / ".hydra" / "config.yaml"),
        kind=_kind(path, summary, job.get("name")),
        summary=summary,
        error=error_line(path) or problem,
        records=read_records(path / "metrics.jsonl"),
    )


@dataclass
class Sweep:
    """The runs of one sweep folder, in job order, and what varies between them."""

    path: Path
    runs: list[Run]

    @property
    def varying(self) -> list[str]:
        """Override keys whose value differs between runs (or that some runs lack)."""
        keys = list(dict.fromkeys(k for run in self.runs for k in run.overrides))
        return [k for k in keys if len({run.overrides.get(k) for run in self.runs}) > 1]

    @property
    def common(self) -> list[str]:
        """Overrides every run shares, as ``key=value``."""
        first = self.runs[0].overrides
        return [f"{k}={v}" for k, v in first.items() if k not in self.varying]

    def numeric_loss(self) -> bool:
        """Whether finished runs span two or more loss rates (a loss-rate x axis makes sense)."""
        return len({run.loss_rate for run in self.runs if not run.failed} - {None}) > 1

    def series_keys(self) -> list[str]:
        """What tells one curve from another: varying overrides, minus the x axis and seed.

        Against the loss rate, every varying override that does not set it; otherwise
        only the scheme's (the rest become categories, :meth:`category_keys`). ``seed`` and
        ``resume`` never do: runs that differ only by seed are one curve
        (:mod:`gclab.report.groups`), and a resumed run is the run it continues.
        """
        if self.numeric_loss():
            keys = [k for k in self.varying if not is_loss_key(k)]
        else:
            keys = [k for k in self.varying if k == "scheme" or k.startswith("scheme.")]
        return [k for k in keys if k not in NOT_SERIES]

    def category_keys(self) -> list[str]:
        return [k for k in self.varying if k not in self.series_keys() and k not in NOT_SERIES]

    def series(self, run: Run) -> str:
        """Curve label: the scheme option, then its other distinguishing overrides.

        A key is shown only on runs that set it, and only if the runs that set it do not
        all agree (``scheme.s=1`` on every coded scheme of a study does not tell them apart).
        """
        extra = [
            f"{label_key(k)}={short(run.overrides[k])}"
            for k in self.series_keys()
            if k != "scheme" and k in run.overrides and self._distinct(k)
        ]
        return f"{run.scheme} ({', '.join(extra)})" if extra else run.scheme

    def _distinct(self, key: str) -> bool:
        return len({run.overrides[key] for run in self.runs if key in run.overrides}) > 1

    def category(self, run: Run) -> str:
        """Bar-group label: the category overrides' values (with their keys when several)."""
        keys = self.category_keys()
        if len(keys) == 1:
            return short(run.overrides.get(keys[0], "–"))
        return "\n".join(f"{k}={short(run.overrides.get(k, '–'))}" for k in keys) or "all runs"


def label_key(key: str) -> str:
    """An override key for a label: ``scheme.s`` -> ``s``, ``train.pipeline`` -> ``pipeline``."""
    return key.removeprefix("scheme.").removeprefix("train.")


def short(value: str) -> str:
    """An override value for a label: a path becomes its file name without extension."""
    return Path(value).stem if "/" in value else value


def _jobs(path: Path) -> list[Path]:
    """The run directories a path names: itself if it is one, else every one under it."""
    if not path.is_dir():
        raise SweepError(f"{path} is not a directory")
    if (path / ".hydra").is_dir():
        return [path]
    jobs = sorted({p.parent.parent for p in path.rglob(".hydra/overrides.yaml")})
    if not jobs:
        raise SweepError(
            f"{path} is not a Hydra sweep folder: no job directory (<job>/.hydra/overrides.yaml) "
            "under it"
        )
    return jobs


def load_sweep(*paths: Path) -> Sweep:
    """Every run under ``paths``: sweep folders, single runs' directories, folders of sweeps
    or of runs (a study); :class:`SweepError` if a path is missing or holds no run.

    Job names are relative to the one sweep folder given, else to the folders' common
    parent; runs are ordered by path, then folder, then ``hydra.job.num``.
    """
    if not paths:
        raise SweepError("no folder given")
    found = [(i, job) for i, path in enumerate(paths) for job in _jobs(path)]
    if len(paths) == 1 and not (paths[0] / ".hydra").is_dir():
        root = paths[0]  # one sweep folder: job names as Hydra numbered them
    else:  # a run's own folder counts from its parent, so that its name stays
        tops = [p.resolve().parent if (p / ".hydra").is_dir() else p.resolve() for p in paths]
        root = Path(os.path.commonpath(tops))
        found = [(i, job.resolve()) for i, job in found]
    runs = [load_run(root, job) for _, job in found]
    order = [(i, Path(run.job).parent.as_posix(), *_order(run)) for (i, _), run in zip(found, runs)]
    return Sweep(root, [run for _, run in sorted(zip(order, runs), key=lambda item: item[0])])


def _order(run: Run) -> tuple[int, str]:
    return (run.num if run.num is not None else 1 << 30, run.job)
