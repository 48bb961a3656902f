"""Run J jobs of one scheme through the round protocol, in symbolic mode (no gradients).

Each round the simulator hands the protocol the same compute time for every worker,
``unit_time × scheme.load`` seconds (``sim.unit_time``: seconds per unit load; by
default :data:`UNIT_TIME`, or 0 for a delay model whose draws are the compute time, a
trace replay, which already scales it by load: :func:`unit_time`); the delay model adds
the rest. Packets carry ``packet_fraction × payload_bytes`` bytes
(``sim.payload_bytes``; they cost time only where ``network.*bandwidth`` is set), and
``network.server_time`` seconds of server work close every round (the simulator decodes
nothing, so it takes a number, not ``measured``). It decodes every job the protocol
reports decodable.
Rounds ``0 .. J+T−1`` are candidates (the last job is due in round ``J−1+T``); the
protocol says which run (:meth:`~gclab.network.RoundProtocol.runs`): with
``recovery=decodable`` a round that serves no undecoded job is skipped and costs
nothing, so the run ends when its last job is decoded; ``wait_all`` runs what the
papers' code runs. Every round begins with the round hook,
``decoder.begin_round`` (skipped rounds too); the simulator never calls ``decoder.plan``:
in symbolic mode decodability depends only on which packets arrived, and building every
worker's task list each round would cost more than the rest of the round together.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from gclab.coding.contract import Decoder, Scheme
from gclab.errors import ConfigError
from gclab.network import DelayModel, Finished, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.network.protocol import MEASURED, check_recovery

#: ``sim.payload_bytes`` by default: the gradient of the small CNN (``model=cnn``,
#: 356 810 float32 parameters), the model of the packet-loss study.
PAYLOAD_BYTES = 4.0 * 356_810

#: ``sim.unit_time`` of a run whose delay model has no compute time of its own (compute
#: seconds per unit load): a worker computing the whole batch gradient takes 2.2 s, the
#: shared Lambda traces' median at load 1 (2.197 s over Sydney's and Tokyo's 256 workers,
#: ``python bench/trace_medians.py``), which is also the SGC papers' main profile's slope
#: and ``delay=trace``'s default ``slope``.
UNIT_TIME = 2.2


@dataclass(frozen=True)
class SimResult:
    """Per-round records of one simulated run (arrays have one entry per round run)."""

    scheme: str
    n: int
    load: float
    jobs: int
    #: The number of each round run (skipped rounds have no entry).
    index: np.ndarray
    durations: np.ndarray
    erasures: np.ndarray
    lost: np.ndarray
    late: np.ndarray
    retransmissions: np.ndarray
    waited: np.ndarray
    #: Seconds of server work charged after each round (included in ``durations``).
    server_time: np.ndarray
    #: Bytes the workers sent in each round, retransmissions included.
    bytes: np.ndarray
    #: Fraction of the batch gradient recovered for the jobs each round finished (their
    #: mean; below 1 only for partial jobs and inexact schemes), the decoded coverage
    #: for a round that finished none.
    coverage: np.ndarray

    @cached_property
    def total_time(self) -> float:
        """The virtual clock at the end: sum of round durations, seconds (a search sorts
        thousands of results by it, more than once)."""
        return float(self.durations.sum())

    @property
    def waits(self) -> int:
        """Rounds that waited for a late packet."""
        return int(self.waited.sum())

    def summary(self) -> dict[str, object]:
        """The simulator's ``summary.json`` record."""
        return {
            "scheme": self.scheme,
            "n": self.n,
            "jobs": self.jobs,
            "rounds": len(self.durations),
            "load": self.load,
            "total_time": self.total_time,
            "mean_round": float(self.durations.mean()),
            "waits": self.waits,
            "retransmissions": int(self.retransmissions.sum()),
            "erasures": int(self.erasures.sum()),
            "lost": int(self.lost.sum()),
            "late": int(self.late.sum()),
            "bytes_sent": float(self.bytes.sum()),
            "server_time_total": float(self.server_time.sum()),
            "coverage_mean": float(self.coverage.mean()),
        }

    def columns(self) -> dict[str, np.ndarray]:
        """The per-round columns of ``rounds.csv``, after ``round``."""
        return {
            "duration": self.durations,
            "erasures": self.erasures,
            "lost": self.lost,
            "late": self.late,
            "retransmissions": self.retransmissions,
            "waited": self.waited.astype(int),
            "server_time": self.server_time,
            "bytes": self.bytes,
            "coverage": self.coverage,
        }

    def write_rounds(self, path: Path) -> None:
        """One CSV row per round: duration (s) and what happened to its packets."""
        columns = self.columns()
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(("round", *columns))
            for r, row in zip(self.index.tolist(), zip(*(c.tolist() for c in columns.values()))):
                writer.writerow((r, *row))


def simulate(
    scheme: Scheme,
    delay: DelayModel,
    network: NetworkConfig,
    jobs: int,
    seed: int,
    unit_time: float = 0.0,
    payload_bytes: float = PAYLOAD_BYTES,
) -> SimResult:
    """Simulate ``jobs`` jobs of ``scheme``; raises :class:`ConfigError` before any round."""
    check_clock(network)
    check_run(scheme, delay, jobs, unit_time, payload_bytes)
    check_recovery(scheme, network)
    protocol = RoundProtocol(network, delay, scheme.n, seed, payload=payload_bytes)
    decoder = scheme.decoder()
    compute = np.full(scheme.n, unit_time * scheme.load)
    index, durations, counts = [], [], []  # counts: erasures, lost, late, retransmissions, waited
    server, sent, coverage = [], [], []
    for r in range(jobs + scheme.T):
        decoder.begin_round(r)
        if not protocol.runs(r, jobs, decoder):
            continue
        out = protocol.charge(protocol.run_round(r, Finished(compute), decoder, _symbolic))
        coverage.append(decode_round(scheme, decoder, out))
        index.append(r)
        durations.append(out.duration)
        server.append(out.server_time)
        sent.append(out.bytes)
        counts.append(
            (out.erased.sum(), out.lost.sum(), out.late.sum(), out.retransmissions, out.waited)
        )
    table = np.array(counts, dtype=np.int64).reshape(-1, 5).T
    return SimResult(
        scheme=scheme.describe(),
        n=scheme.n,
        load=float(scheme.load),
        jobs=int(jobs),
        index=np.array(index, dtype=np.int64),
        durations=np.array(durations, dtype=np.float64),
        erasures=table[0],
        lost=table[1],
        late=table[2],
        retransmissions=table[3],
        waited=table[4].astype(bool),
        server_time=np.array(server, dtype=np.float64),
        bytes=np.array(sent, dtype=np.float64),
        coverage=np.array(coverage, dtype=np.float64),
    )


def decode_round(scheme: Scheme, decoder: Decoder, out: RoundOutcome) -> float:
    """Decode the round's decodable jobs (with ``recovery=partial`` also the covered part of
    a due job that is not decodable); the round's coverage, the mean over those jobs."""
    for job in out.decodable:
        decoder.decode(job)
    covered = [scheme.decoded_coverage] * len(out.decodable)
    covered += [decoder.decode_partial(job)[1] for job in out.partial]
    return float(np.mean(covered)) if covered else scheme.decoded_coverage


def check_clock(network: NetworkConfig) -> None:
    """The simulator has no workers to wait for and decodes nothing: only the virtual clock
    and a number of seconds of server time make sense."""
    if network.clock != "virtual":
        raise ConfigError(
            f"network.clock='{network.clock}' is not supported by the simulator, which has "
            "no workers to wait for; use network.clock=virtual (the default)."
        )
    if network.server_time == MEASURED:
        raise ConfigError(
            f"network.server_time={MEASURED} is not supported by the simulator, which decodes "
            "nothing to measure; give the server's seconds per round (e.g. 0.005)."
        )


def unit_time(configured: float | None, delay: DelayModel) -> float:
    """A run's compute seconds per unit load: ``sim.unit_time``, or when it is null (the
    default) :data:`UNIT_TIME`, unless the delay model's draws are the workers' compute
    time (``delay.computes``: a trace replay), which would count it twice: then 0.

    A run with neither times only the network (a round of ``delay=bernoulli`` would cost
    nothing but its retransmission timeouts), which describes no cluster.
    """
    if configured is not None:
        return configured
    return 0.0 if delay.computes else UNIT_TIME


def check_run(
    scheme: Scheme,
    delay: DelayModel,
    jobs: int,
    unit_time: float,
    payload_bytes: float = PAYLOAD_BYTES,
) -> None:
    """Raise :class:`ConfigError` unless ``sim.jobs``, ``sim.unit_time``,
    ``sim.payload_bytes`` and the delay model fit."""
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ConfigError(f"sim.jobs={jobs!r} is invalid: it must be an integer >= 1.")
    if not np.isfinite(unit_time) or unit_time < 0:
        raise ConfigError(
            f"sim.unit_time={unit_time!r} is invalid: it must be a finite number >= 0."
        )
    if not np.isfinite(payload_bytes) or payload_bytes < 0:
        raise ConfigError(
            f"sim.payload_bytes={payload_bytes!r} is invalid: it must be a number of bytes >= 0."
        )
    delay.check(scheme.n, jobs + scheme.T)


def _symbolic(round: int, worker: int) -> None:
    """Payload of every packet in symbolic mode: the decoder only needs the arrival."""
    return None
