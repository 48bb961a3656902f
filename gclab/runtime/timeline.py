"""A wall-clock round's timeline: when the driver and each worker reached each phase.

On the wall clock a round's duration is what really happened between the driver
sending the round's calls and its end, Ray's messages, the weights' fetch and the
packets' transfers included. To compare that with what the virtual clock charges for
each piece (the weights' broadcast, the compute, the uplink, the server's work), the
round record keeps its timeline (``timeline`` in metrics.jsonl): the driver's
``time.monotonic()`` when the calls went out (``sent``, absolute), and relative to it,
in seconds, the driver's own phases (:data:`DRIVER`) and per logical worker its actor's
phases (:data:`gclab.runtime.worker.PHASES`) and ``back``, when its report was in the
driver's hand. CLOCK_MONOTONIC is one clock for every process and network namespace of
a host, so the stamps of a ``cluster=netns`` box compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gclab.runtime.worker import PHASES, WorkerReport

#: The driver's phases of a round: the round's work began (before the weights are
#: gathered), the weights went to the object store, the round protocol ended, the
#: server's decode and optimizer steps were done.
DRIVER = ("top", "put", "closed", "served")
#: A worker's phases, its actor's and then the driver's receipt of its report.
WORKER = (*PHASES, "back")


def round_timeline(
    sent: float, driver: Mapping[str, float], reports: Mapping[int, WorkerReport], n: int
) -> dict[str, Any]:
    """The ``timeline`` of a round whose calls went out at ``sent``: ``driver``'s stamps
    and each of the ``n`` workers' (``None`` for a worker without a report, e.g. its
    actor died), relative to ``sent``; a phase no worker stamped is left out."""
    out: dict[str, Any] = {"sent": sent}
    out.update({phase: _since(sent, at) for phase, at in driver.items()})
    for phase in WORKER:
        stamps = [reports[w].times.get(phase) if w in reports else None for w in range(n)]
        if any(at is not None for at in stamps):
            out[phase] = [None if at is None else _since(sent, at) for at in stamps]
    return out


def _since(sent: float, at: float) -> float:
    return round(at - sent, 6)  # microseconds: the phases last milliseconds and more
