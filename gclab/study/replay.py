"""The study's shortcut: a finished training run replayed under another delay model.

For an exact scheme whose erasures are always recovered, the weights after job ``j`` do
not depend on the losses: every job's gradient is the true batch gradient, computed on
the weights of all earlier jobs (T = 0 decodes job t in round t; with
``train.pipeline=interleaved`` each model's previous job is applied before its next
starts). Only *when* job ``j`` is applied changes. So a run's accuracy per job, its
measured per-worker compute times (``compute_s`` in metrics.jsonl), its measured server
time per round (``server_time``, charged as ``network.server_time`` says) and the round
protocol with the scheme's symbolic decoder give the run under any other delay model:

* :func:`replay_rounds` runs the protocol on recorded compute times, with the training
  loop's bookkeeping (decode every decodable job below ``num_jobs``, apply in job order);
* :func:`replay_run` turns a run directory into the run directory the same config with
  another ``delay`` would have written: the source's evaluations, each placed at the
  virtual time its job is applied in the replay.

A ``train.pipeline=stale`` run with T > 0 is not replayable (its gradients depend on
when earlier jobs were applied), nor is an inexact scheme or a ``network.recovery=partial``
run: :func:`not_replayable` says why.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

import gclab.config  # noqa: F401  (registers every schema, so the configs instantiate)
from gclab.app import config_text
from gclab.coding.contract import Scheme
from gclab.config import Pipeline
from gclab.errors import under
from gclab.network import Finished, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.network.protocol import MEASURED
from gclab.schemas import instantiate_checked, instantiate_scheme
from gclab.tracking.artifacts import read_metrics
from gclab.tracking.loggers import Logger
from gclab.tracking.run import RunRecorder


class ReplayError(ValueError):
    """The source run cannot be replayed into the requested config (the message says why)."""


@dataclass
class ReplayedRound:
    """One replayed round: the protocol's outcome and the jobs decoded and applied."""

    outcome: RoundOutcome
    decoded: list[int]
    applied: list[int]
    #: The server's measured seconds of the source round it stands for (charged or not).
    server: float = 0.0


@dataclass
class Replay:
    """Every replayed round, and the round in which each job was applied."""

    rounds: list[ReplayedRound] = field(default_factory=list)
    applied_at: dict[int, int] = field(default_factory=dict)
    #: Rounds past the recorded ones, run on the last recorded round's compute times.
    extended: int = 0


def replay_rounds(
    scheme: Scheme,
    protocol: RoundProtocol,
    compute: np.ndarray,
    num_jobs: int,
    until: int = -1,
    server: np.ndarray | None = None,
) -> Replay:
    """Run ``len(compute)`` rounds (``compute[r, w]``: worker w's seconds in round r), and
    more until job ``until`` is applied, on the last row's compute times.

    ``server[r]`` is the server's measured seconds after round ``r`` (the last one's for
    the rounds past it), which :meth:`RoundProtocol.charge` puts on the clock where
    ``network.server_time=measured``.

    Mirrors the training loop: decodes every decodable job below ``num_jobs`` (drain
    rounds start jobs that do not exist), applies jobs strictly in order.
    """
    if until >= num_jobs:
        raise ValueError(f"job {until} never runs: the run has {num_jobs} jobs.")
    decoder = scheme.decoder()
    replay, next_job, pending = Replay(), 0, set()
    r = 0
    while r < len(compute) or next_job <= until:
        row = min(r, len(compute) - 1)
        measured = None if server is None else float(server[row])
        decoder.begin_round(r)
        outcome = protocol.charge(
            protocol.run_round(r, Finished(compute[row]), decoder, _symbolic), measured
        )
        decoded = [j for j in outcome.decodable if j < num_jobs]
        for job in decoded:
            decoder.decode(job)
        pending.update(decoded)
        applied = []
        while next_job in pending:
            pending.discard(next_job)
            applied.append(next_job)
            replay.applied_at[next_job] = r
            next_job += 1
        replay.rounds.append(ReplayedRound(outcome, decoded, applied, measured or 0.0))
        replay.extended += r >= len(compute)
        r += 1
    return replay


def _symbolic(round: int, worker: int) -> None:
    """Payload in symbolic mode: the decoder only needs to know that the packet arrived."""
    return None


def recorded_server_time(rounds: list[dict[str, Any]]) -> np.ndarray:
    """Each round record's measured server seconds (``server_ms``, charged or not), or for
    a run recorded before the clock charged it, the decode alone (``decode_ms``; 0 where
    nothing decoded)."""
    key = "server_ms" if all("server_ms" in rec for rec in rounds) else "decode_ms"
    return np.array([(rec.get(key) or 0.0) / 1e3 for rec in rounds], dtype=np.float64)


def evaluated_jobs(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Each evaluation of a metrics.jsonl with the last job applied before it: the weights
    it evaluated are those after jobs 0..job (jobs apply in order)."""
    out, applied = [], 0
    for rec in records:
        if rec.get("kind") == "round":
            applied += rec.get("jobs_applied", 0)
        elif rec.get("kind") == "eval" and applied:
            out.append((applied - 1, rec))
    return out


def not_replayable(cfg: DictConfig, scheme: Scheme) -> str | None:
    """Why the weights after each job could depend on the delay model; None if they cannot."""
    if not scheme.exact:
        return f"{scheme.describe()} is not exact: its weights depend on which packets arrive"
    if cfg.network.recovery == "partial":
        return "network.recovery=partial applies gradients that depend on which packets arrive"
    pipeline = Pipeline(getattr(cfg.train.pipeline, "value", cfg.train.pipeline))
    if scheme.T > 0 and pipeline is not Pipeline.interleaved:
        return (
            f"{scheme.describe()} with train.pipeline={pipeline.name} computes each "
            "job on weights that depend on when earlier jobs were applied"
        )
    if any(cfg.faults[kind] for kind in cfg.faults):
        return "injected faults (faults.*) make failed packets, which a replay does not model"
    return None


def build_protocol(cfg: DictConfig, payload: float = 0.0) -> tuple[Scheme, RoundProtocol]:
    """The run's scheme and round protocol, as the app builds them (no data, no Ray), for a
    model whose gradient has ``payload`` bytes (:func:`payload_of` a recorded run)."""
    with under("network"):
        network = NetworkConfig(**OmegaConf.to_container(cfg.network))
    if network.clock != "virtual":
        raise ReplayError(
            f"network.clock='{network.clock}': only virtual-clock runs can be replayed."
        )
    scheme = instantiate_scheme(cfg)
    delay = instantiate_checked(cfg.delay)
    return scheme, RoundProtocol(network, delay, scheme.n, cfg.seed, payload=payload)


def payload_of(summary: dict[str, Any], rounds: list[dict[str, Any]], cfg: DictConfig) -> float:
    """The bytes of one full gradient of a recorded run: its summary's ``payload_bytes``,
    or for runs recorded before it, what its first round sent (``n`` first transmissions
    and its retransmissions, each ``packet_fraction`` of the payload); 0 for runs
    recorded before the clock charged bytes."""
    if "payload_bytes" in summary:
        return float(summary["payload_bytes"])
    first = next((rec for rec in rounds if "bytes" in rec), None)
    if first is None:
        return 0.0
    scheme = instantiate_scheme(cfg)
    return first["bytes"] / ((scheme.n + first["retransmissions"]) * scheme.packet_fraction)


#: Config keys a replay may change (``delay``) or that never affect the weights.
IGNORED = ("hydra", "delay", "resume", "logger")


#: Keys added after some archived runs were recorded, with the value that gives what those
#: runs did: the clock charged no server time, and the code was chosen once.
LEGACY = {
    "network.server_time": 0.0,
    "network.stream": 0,
    "train.models": None,
    "train.lrs": None,
    "train.confirm_target": False,
    "adapt": {"_target_": "gclab.adapt.options.Off"},
}


MISSING_KEY = object()

#: Classes that moved to other modules after some archived runs were recorded: the
#: ``_target_`` those runs name, and where the class is now.
MOVED = {
    "gclab.coding.sgc.SRSGC": "gclab.coding.sr_sgc.SRSGC",
    "gclab.coding.sgc.MSGC": "gclab.coding.m_sgc.MSGC",
}


def source_config(source: Path) -> DictConfig:
    """A finished run's config, with the keys it predates (:data:`LEGACY`) spelt out as
    the values it ran under, and the classes it names where they are now (:data:`MOVED`)."""
    cfg = OmegaConf.load(source / ".hydra" / "config.yaml")
    for key, value in LEGACY.items():
        if OmegaConf.select(cfg, key, default=MISSING_KEY) is MISSING_KEY:
            OmegaConf.update(cfg, key, value, force_add=True)
    _move_targets(cfg)
    return cfg


def _move_targets(node: DictConfig) -> None:
    """Rewrite every ``_target_`` of ``node`` and its children that :data:`MOVED` names."""
    for key, value in node.items_ex(resolve=False):
        if isinstance(value, DictConfig):
            _move_targets(value)
        elif key == "_target_" and value in MOVED:
            node[key] = MOVED[value]


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = dict.fromkeys([*a, *b])
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def _plain(cfg: DictConfig, drop: tuple[str, ...] = IGNORED) -> dict[str, Any]:
    """The config as plain containers (enums as names, as Hydra saves them), minus ``drop``."""
    data = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    return {k: v for k, v in data.items() if k not in drop}


def _source_records(source: Path, cfg: DictConfig) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The source's summary and metrics, once it is known to be a finished run of ``cfg``
    under another delay model."""
    summary_path = source / "summary.json"
    if not summary_path.is_file():
        raise ReplayError(f"{source} has no summary.json: the source run has not finished.")
    differ = _differences(_plain(source_config(source)), _plain(cfg))
    if differ:
        raise ReplayError(
            f"{source} differs from the replayed config in {', '.join(differ)}, not only in "
            "the delay model: a replay changes only `delay`."
        )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return summary, read_metrics(source / "metrics.jsonl")


def replay_run(
    source: Path, cfg: DictConfig, dest: Path, overrides: list[str], choices: dict[str, str]
) -> dict[str, Any]:
    """Write into ``dest`` the run of ``cfg`` that the finished run ``source`` (same config,
    another delay model) implies; returns its summary.

    ``dest`` gets what the app writes (``.hydra/`` with ``overrides`` and the config
    group ``choices``, ``metrics.jsonl``, ``summary.json``) plus ``replayed_from`` and
    ``extended_rounds`` in the summary. Round records are the replay's; each evaluation
    of the source (made once its jobs 0..j were applied) is placed at the end of the
    round that applies job j in the replay. Train losses are the source's per round
    (round r computes job r in both); wall and decode times are null (nothing ran).
    """
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.pop("hydra", None)  # compose() may return it; it is no part of a run's config
    scheme, _ = build_protocol(cfg)
    reason = not_replayable(cfg, scheme)
    if reason is not None:
        raise ReplayError(f"the run is not replayable: {reason}.")
    summary, records = _source_records(source, cfg)
    rounds = [rec for rec in records if rec["kind"] == "round"]
    scheme, protocol = build_protocol(cfg, payload_of(summary, rounds, cfg))
    with under("delay"):  # as the app checks it
        protocol.delay.check(scheme.n, summary["num_jobs"] + scheme.T)
    evals = evaluated_jobs(records)
    compute = np.array([rec["compute_s"] for rec in rounds], dtype=np.float64)
    until = max((job for job, _ in evals), default=-1)
    server = recorded_server_time(rounds)
    replay = replay_rounds(scheme, protocol, compute, summary["num_jobs"], until, server)

    extra = {"replayed_from": str(source), "extended_rounds": replay.extended}
    placed = [(replay.applied_at[job], rec) for job, rec in evals]
    return _write_run(
        dest, cfg, overrides, choices, scheme, summary, extra, replay, records, placed
    )


def retime_run(
    source: Path,
    dest: Path,
    median_compute: float,
    charge_server: bool = False,
    scale_network: bool = False,
) -> dict[str, Any]:
    """Write into ``dest`` the finished run ``source`` on a normalised clock: every
    recorded compute time multiplied by one factor, so that their median becomes
    ``median_compute`` seconds; returns its summary.

    The recorded server time is scaled by the same factor (the same machine did both)
    and charged where the run's config says ``network.server_time=measured``, or
    everywhere with ``charge_server`` (for runs recorded before the clock charged it:
    their decode time alone). With ``scale_network`` the rto, the latency and the bytes'
    time (every bandwidth divided by the factor) scale too: one change of the unit of
    time, so the run keeps the regime it ran in (compute per rto, bytes per compute); it
    then needs a delay model without seconds of its own (none, bernoulli,
    gilbert_elliott). The written config is the run's own; ``compute_scale`` in the
    summary says by how much its clock was scaled.

    Same config and losses, so the same jobs decode in the same rounds, unless the new
    times reorder deliveries in some recovery: that is checked round by round against
    the recorded ``jobs_applied`` (ReplayError if any differs), which keeps the weights,
    and so every evaluation, those of ``source``. Any scheme and pipeline can be
    re-timed; a run with injected faults cannot (a replay does not model them).
    """
    cfg = source_config(source)
    clocked = copy.deepcopy(cfg)
    if charge_server:
        clocked.network.server_time = MEASURED
    if any(cfg.faults[kind] for kind in cfg.faults):
        raise ReplayError(f"{source} has injected faults (faults.*): a replay does not model them.")
    summary, records = _source_records(source, cfg)
    rounds = [rec for rec in records if rec["kind"] == "round"]
    measured = np.array([rec["compute_s"] for rec in rounds], dtype=np.float64)
    scale = median_compute / float(np.median(measured))
    if scale_network:
        _scale_network(clocked, scale, source)
    scheme, protocol = build_protocol(clocked, payload_of(summary, rounds, cfg))
    server = recorded_server_time(rounds) * scale
    replay = replay_rounds(scheme, protocol, measured * scale, summary["num_jobs"], -1, server)
    recorded = [rec.get("jobs_applied", 0) for rec in rounds]
    timed = [len(step.applied) for step in replay.rounds]
    if timed != recorded:
        differ = (i for i, (a, b) in enumerate(zip(timed, recorded)) if a != b)
        r = next(differ, min(len(timed), len(recorded)))
        raise ReplayError(
            f"re-timing {source} by {scale:.3f} changes which jobs are applied from round {r} "
            "on (a recovery's deliveries reorder): its weights would not be the run's."
        )
    overrides, choices = _read_hydra(source / ".hydra")
    extra = {"retimed_from": str(source), "compute_scale": scale}
    placed = [(rec["round"], rec) for rec in records if rec["kind"] == "eval"]  # where they were
    written = copy.deepcopy(cfg if scale_network else clocked)  # the run's own network
    written.network.server_time = clocked.network.server_time
    return _write_run(
        dest, written, overrides, choices, scheme, summary, extra, replay, records, placed,
        clocked.train.time_budget,
    )  # fmt: skip


#: Delay models whose draws have no seconds of their own: a change of the unit of time
#: leaves their losses as they were.
UNITLESS = ("none", "bernoulli", "gilbert_elliott")


def _scale_network(cfg: DictConfig, scale: float, source: Path) -> None:
    """Multiply every time of ``cfg``'s network by ``scale`` (rto, latency, the bytes'
    time, the time budget), in place; ReplayError for a delay model with its own seconds."""
    target = str(OmegaConf.select(cfg, "delay._target_") or "")
    names = {"gclab.network.base.DelayModel": "none"}
    kind = names.get(target, target.rsplit(".", 1)[-1])
    allowed = ("DelayModel", "Bernoulli", "GilbertElliott", *UNITLESS)
    if kind not in allowed:
        raise ReplayError(
            f"{source}'s delay model {target} has seconds of its own, which a change of the "
            f"unit of time would have to scale too; normalise only runs with {', '.join(UNITLESS)}."
        )
    network = cfg.network
    network.rto = float(network.rto) * scale
    network.latency = float(network.latency) * scale
    for key in ("bandwidth", "server_bandwidth", "broadcast_bandwidth"):
        if network[key] is not None:
            network[key] = float(network[key]) / scale
    if cfg.train.time_budget is not None:
        cfg.train.time_budget = float(cfg.train.time_budget) * scale


def _read_hydra(folder: Path) -> tuple[list[str], dict[str, str]]:
    """A run's overrides and config group choices, as :func:`_write_hydra` writes them."""
    overrides = folder / "overrides.yaml"
    hydra = folder / "hydra.yaml"
    meta = (yaml.safe_load(hydra.read_text(encoding="utf-8")) or {}) if hydra.is_file() else {}
    choices = (meta.get("hydra") or {}).get("runtime", {}).get("choices", {})
    return (
        yaml.safe_load(overrides.read_text(encoding="utf-8")) if overrides.is_file() else []
    ), choices


def _write_run(
    dest: Path,
    cfg: DictConfig,
    overrides: list[str],
    choices: dict[str, str],
    scheme: Scheme,
    summary: dict[str, Any],
    extra: dict[str, Any],
    replay: Replay,
    records: list[dict[str, Any]],
    evals: list[tuple[int, dict[str, Any]]],
    budget: float | None = None,
) -> dict[str, Any]:
    """The run directory of ``replay``: ``.hydra/``, metrics.jsonl (its rounds, with the
    train losses of ``records``, and each evaluation record of ``evals`` at the end of its
    round), summary.json.

    It ends where the run of ``cfg`` would: after the round whose clock reaches
    ``train.time_budget`` (or ``budget``, the budget on a re-timed clock), the rounds and
    evaluations after it dropped, as the training loop stops there."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / ".hydra").mkdir(parents=True)
    _write_hydra(dest / ".hydra", cfg, overrides, choices)
    extra = {
        "scheme": scheme.name, "load": scheme.load, "n": scheme.n,
        "num_jobs": summary["num_jobs"],
        **{k: summary[k] for k in ("processors", "commit", "models") if k in summary},
        **extra,
    }  # fmt: skip
    recorder = RunRecorder(
        dest, Logger(), cfg.train.target_accuracy, extra, config_text(cfg), checkpointed=False
    )
    rounds = [rec for rec in records if rec["kind"] == "round"]
    by_round: dict[int, list[dict[str, Any]]] = {}
    for r, rec in evals:
        by_round.setdefault(r, []).append(rec)
    nan, faults, result = math.nan, {"failed": 0, "failures_total": 0}, None
    budget = cfg.train.time_budget if budget is None else budget
    try:
        for r, step in enumerate(replay.rounds):
            loss = rounds[r]["train_loss"] if r < len(rounds) else nan
            recorder.round(
                r, step.outcome, step.decoded, step.applied, nan, loss, nan,
                step.outcome.compute.tolist(), faults, 1e3 * step.server,
            )  # fmt: skip
            for rec in by_round.get(r, []):
                recorder.evaluation(
                    r, rec.get("model_accuracy") or [rec["test_accuracy"]],
                    rec.get("model_loss") or [rec["test_loss"]], rec.get("test_images"),
                    rec.get("decisive", True),
                )  # fmt: skip
            if budget is not None and recorder.virtual_time >= budget:
                break
        result = recorder.summary()
        return result
    finally:
        recorder.close(result, failed=result is None)


def _write_hydra(folder: Path, cfg: DictConfig, overrides: list[str], choices: dict) -> None:
    """``.hydra/`` as Hydra writes it for a run of the training app."""
    plain = _plain(cfg, drop=("hydra",))
    (folder / "config.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
    (folder / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    meta = {"job": {"name": "gclab", "num": None}, "runtime": {"choices": dict(choices)}}
    (folder / "hydra.yaml").write_text(yaml.safe_dump({"hydra": meta}, sort_keys=False))
