"""Where a round's worker results come from, and the clock the round protocol runs on.

The round protocol (:mod:`gclab.network.protocol`) applies one set of rules; a clock
only answers two questions for it: what time it is, and which results have come back
by a given time. Both clocks read the results from an :class:`ArrivalSource`:

* :class:`VirtualClock` (``network.clock=virtual``) takes every result at the start of
  the round, with the compute time the source reports for it (the simulator's choice,
  or what a runtime worker measured itself), and then jumps from event to event: a
  round costs no real time, and its durations follow from the model alone.
* :class:`WallClock` (``network.clock=wall``, runtime only) takes each result when the
  source hands it over, stamps it with the time since the round's work was sent out,
  and really sleeps until the events the rules schedule. ``monotonic`` and ``sleep``
  are injectable, so tests can run it on a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np


class ArrivalSource(Protocol):
    """One round's worker results (in the runtime: its actor calls in flight)."""

    #: ``time.monotonic()`` when the round's work was sent out: its start on the wall clock.
    sent: float
    #: ``bool [n]``: the results that came back without a valid packet.
    failed: np.ndarray

    def pending(self) -> bool:
        """Whether some worker's result has not come back yet."""
        ...

    def wait(self, timeout: float | None) -> Sequence[int]:
        """Block until results come back or ``timeout`` seconds pass (``None``: no limit).

        Returns the workers whose results came back (empty on a timeout).
        """
        ...

    def seconds(self, workers: np.ndarray) -> np.ndarray:
        """The compute times ``workers`` measured themselves, seconds (0: no report)."""
        ...


class Finished:
    """Results that are all in before the round starts, with given compute times.

    The simulator's source: ``compute[w]`` is the time worker ``w`` computed and
    ``failed[w]`` (optional) marks a result without a valid packet.
    """

    def __init__(self, compute: np.ndarray, failed: np.ndarray | None = None) -> None:
        compute = np.asarray(compute, dtype=np.float64)
        if compute.ndim != 1 or not np.all(np.isfinite(compute)) or np.any(compute < 0):
            raise ValueError(f"compute times must be finite and >= 0, got {compute!r}.")
        self.compute = compute
        self.failed = np.zeros(compute.shape, bool) if failed is None else np.asarray(failed)
        self.sent = time.monotonic()
        self._back = False

    def pending(self) -> bool:
        return not self._back

    def wait(self, timeout: float | None) -> np.ndarray:
        self._back = True
        return np.arange(len(self.compute))

    def seconds(self, workers: np.ndarray) -> np.ndarray:
        return self.compute[workers]


class Back(NamedTuple):
    """The results that came back by some time: ``workers``, and per worker its compute
    seconds and whether its result holds no valid packet."""

    workers: np.ndarray
    compute: np.ndarray
    failed: np.ndarray


#: Nothing came back.
NOTHING = Back(np.array([], dtype=np.intp), np.array([]), np.array([], dtype=bool))


class Timeline(Protocol):
    """One round on a clock: the time since the round's start, and the results by then."""

    def now(self) -> float:
        """Seconds since the round's start."""
        ...

    def pending(self) -> bool:
        """Whether some worker's result has not come back yet."""
        ...

    def wait(self, until: float | None) -> Back:
        """Advance to ``until`` (seconds since the start) or to results that come back first.

        ``None`` waits for the next results; it needs some to be pending.
        """
        ...


#: Makes one round's timeline from its arrival source: :class:`VirtualClock` or
#: :class:`WallClock` (``functools.partial`` sets a wall clock's ``monotonic``, ``sleep``).
Clock = Callable[[ArrivalSource], Timeline]


class VirtualClock:
    """One round's timeline: every result is in at the start, time jumps from event to event."""

    def __init__(self, source: ArrivalSource) -> None:
        self.source = source
        self._now = 0.0
        self._in = False  # every result taken

    def now(self) -> float:
        return self._now

    def pending(self) -> bool:
        return not self._in and self.source.pending()

    def wait(self, until: float | None) -> Back:
        if self._in:
            if until is not None and until > self._now:
                self._now = until  # exactly the event's time: no drift
            return NOTHING
        back = [NOTHING.workers]
        while self.source.pending():  # no time passes: the results are the round's premise
            back.append(np.asarray(self.source.wait(None), dtype=np.intp))
        self._in = True
        workers = np.concatenate(back)
        return Back(workers, self.source.seconds(workers), self.source.failed[workers])


class WallClock:
    """One round's timeline: results come back when the source hands them over, stamped with
    the time since it sent the work out; waits are real sleeps."""

    def __init__(
        self,
        source: ArrivalSource,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source = source
        self.monotonic = monotonic
        self.sleep = sleep

    def now(self) -> float:
        return self.monotonic() - self.source.sent

    def pending(self) -> bool:
        return self.source.pending()

    def wait(self, until: float | None) -> Back:
        timeout = None if until is None else max(0.0, until - self.now())
        if not self.source.pending():
            self.sleep(timeout or 0.0)
            return NOTHING
        workers = np.array(self.source.wait(timeout), dtype=np.intp)
        now = self.now()  # an actor's workers come back together: they share it
        return Back(workers, np.full(len(workers), now), self.source.failed[workers])
