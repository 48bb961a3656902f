"""What the server observed of the last rounds, and the delay model the search replays.

For each round the server knows when it started on its clock, each worker's compute
time and when each first transmission arrived: a packet that arrived after its round
closed is observed (when it arrives), a lost packet is not. At a decision at clock time
``now`` a packet that has not arrived yet is known only to take at least ``now − start``
(a lower bound, which is what the server uses), so nothing from the future enters.

The search asks what the same rounds would have cost at another load ``L``. A worker's
observed arrival ``a_w`` at the round's load ``L_r`` splits into its compute time
``c_w``, the fixed overhead (latency, the weights' broadcast, the packet alone on its
links) and the rest, its delay ``d_w``. :class:`ObservedDelays` replays, for column
(round) ``i``,

    delay_w(L) = c_w·L/L_r + d_w + slope·(L − L_r)        (clipped at 0)

with the compute time scaled in proportion to the load (the observations) and
``slope`` the delay model's own seconds per unit load where it states one
(:func:`load_slope`: ``delay=trace``'s ``delay.slope``), else 0. An unobserved (lost)
packet takes the median delay of its round. The overhead is exact for unshared links;
with ``network.server_bandwidth`` set it is the packet alone on the links, a lower bound.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from gclab.network import DelayModel, RoundOutcome, RoundProtocol


@dataclass(frozen=True)
class Observed:
    """One round as the server saw it (arrays ``[n]``, seconds from the round's start)."""

    start: float
    #: First-transmission arrivals; NaN for a lost packet.
    arrival: np.ndarray
    compute: np.ndarray
    load: float
    #: Latency, broadcast and the packet alone on the links: the part that is no delay.
    overhead: float
    #: Seconds of server work charged after the round.
    server_time: float


class Window:
    """The last ``rounds`` rounds the server observed, oldest first."""

    def __init__(self, rounds: int) -> None:
        self.rounds: deque[Observed] = deque(maxlen=rounds)

    def __len__(self) -> int:
        return len(self.rounds)

    def add(self, outcome: RoundOutcome, protocol: RoundProtocol, load: float, size: float) -> None:
        """Record a round the protocol ran at ``load`` with packets of ``size`` bytes."""
        links = protocol.links
        overhead = protocol.network.latency + links.broadcast_time(protocol.n) + links.alone(size)
        arrival = np.where(outcome.lost, np.nan, outcome.arrival)
        compute = np.nan_to_num(np.asarray(outcome.compute, dtype=np.float64))
        observed = Observed(
            outcome.start, arrival, compute, float(load), overhead, float(outcome.server_time)
        )
        self.rounds.append(observed)

    def server_time(self) -> float:
        """The mean server time per round (what ``network.server_time=measured`` charged)."""
        return float(np.mean([o.server_time for o in self.rounds]))

    def model(self, now: float, slope: float) -> ObservedDelays:
        """The window as a delay model, with what is known at clock time ``now``."""
        compute = np.stack([o.compute for o in self.rounds], axis=1)
        delay = np.empty_like(compute)
        span = now - self.rounds[0].start  # the time the window covers
        for i, o in enumerate(self.rounds):
            flying = o.arrival > now - o.start  # not arrived yet: at least this long
            rest = np.minimum(o.arrival, now - o.start) - o.overhead - o.compute
            known = ~np.isnan(rest)
            delay[:, i] = np.where(known, rest, np.median(rest[known]) if known.any() else 0.0)
            delay[flying, i] += span  # and, as far as the window can tell, a window longer
        loads = np.array([o.load for o in self.rounds])
        return ObservedDelays(compute, delay, loads, slope)


class ObservedDelays(DelayModel):
    """Replays observed rounds at any load (module docstring); column ``r mod rounds``."""

    def __init__(
        self, compute: np.ndarray, delay: np.ndarray, loads: np.ndarray, slope: float
    ) -> None:
        self.compute = compute
        self.delay = delay
        self.loads = loads
        self.slope = slope
        #: Seconds per unit load of each observation: none for a delay observed as 0.
        self.slopes = np.where(delay > 0, slope, 0.0)

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        i = round % self.delay.shape[1]
        base = self.loads[i]
        value = (
            self.compute[:, i] * load / base + self.delay[:, i] + self.slopes[:, i] * (load - base)
        )
        return np.maximum(value, 0.0)

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        columns = np.arange(rounds) % self.delay.shape[1]
        base = self.loads[columns][None, :, None]
        loads = np.asarray(loads, dtype=np.float64)[:, None, None]
        out = self.slopes[:, columns].T[None] * (loads - base)
        out += self.delay[:, columns].T[None]
        if self.compute.any():  # none where the delay model's draws are the compute (a trace)
            out += self.compute[:, columns].T[None] * (loads / base)
        return np.maximum(out, 0.0, out=out)


def load_slope(delay: DelayModel) -> float:
    """Seconds of delay per unit load the model states (``delay.slope``; a composite's
    parts add up), else 0."""
    parts = getattr(delay, "parts", None)
    if parts is not None:
        return sum(load_slope(part) for part in parts)
    return float(getattr(delay, "slope", 0.0))
