"""Network and time model shared by both engines (pure numpy: no Ray, no torch).

Delay/loss models (``gclab/conf/delay``) say how long packets take and which are lost;
:class:`RoundProtocol` turns them into round durations, erasures and recoveries, on the
virtual or the wall clock (:mod:`gclab.network.clock`). The config layer
(:mod:`gclab.schemas`) derives the ``delay`` options' schemas.
"""

from gclab.network import bernoulli, composite, gilbert_elliott, straggler, tcp_loss, trace
from gclab.network.base import DelayModel
from gclab.network.clock import ArrivalSource, Finished, VirtualClock, WallClock
from gclab.network.protocol import NetworkConfig, RoundOutcome, RoundProtocol
from gclab.network.rounds import RecoveryError

__all__ = [
    "ArrivalSource",
    "DelayModel",
    "Finished",
    "NetworkConfig",
    "RecoveryError",
    "RoundOutcome",
    "RoundProtocol",
    "VirtualClock",
    "WallClock",
    "bernoulli",
    "composite",
    "gilbert_elliott",
    "straggler",
    "tcp_loss",
    "trace",
]
