"""An adaptive run's switch to another scheme, between rounds (``adapt=search``).

The controller (:mod:`gclab.adapt.decide`) decides at a job boundary where no job is in
flight (training adapts among schemes with ``T = 0``, whose job ``r`` is decoded by the
end of round ``r``). The workers then take the new scheme's shards and fresh encoders,
a fresh decoder takes over from the next round (round and job numbers continue), and
the round protocol keeps its clock and counters but forgets the old scheme's straggler
model and the jobs it knew decodable early.
"""

from __future__ import annotations

from gclab.coding.contract import Decoder, Scheme
from gclab.network.protocol import RoundProtocol
from gclab.runtime.pool import Pool


def switch(
    scheme: Scheme, pool: Pool, protocol: RoundProtocol, grad_size: int
) -> tuple[Decoder, RoundProtocol]:
    """Move the workers to ``scheme``; its decoder and the protocol for the next rounds."""
    pool.switch(scheme)
    fresh = RoundProtocol(
        protocol.network, protocol.delay, protocol.n, protocol.seed, clock=protocol.timer,
        payload=protocol.links.payload,
    )  # fmt: skip
    fresh.load_state_dict({**protocol.state_dict(), "ready": []})
    return scheme.decoder(grad_size), fresh
