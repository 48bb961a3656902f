"""Network and time model shared by both engines (pure numpy: no Ray, no torch).

Delay/loss models (``gclab/conf/delay``) say how long packets take and which are lost;
:class:`RoundProtocol` turns them into round durations, erasures and recoveries.
The config layer (:mod:`gclab.schemas`) derives the ``delay`` options' schemas.
"""

from gclab.network import bernoulli, composite, gilbert_elliott, straggler, trace
from gclab.network.base import DelayModel
from gclab.network.protocol import NetworkConfig, RecoveryError, RoundOutcome, RoundProtocol

__all__ = [
    "DelayModel",
    "NetworkConfig",
    "RecoveryError",
    "RoundOutcome",
    "RoundProtocol",
    "bernoulli",
    "composite",
    "gilbert_elliott",
    "straggler",
    "trace",
]
