"""Network and time model shared by both engines (pure numpy: no Ray, no torch).

Delay/loss models (``gclab/conf/delay``) say how long packets take and which are lost;
:class:`RoundProtocol` turns them into round durations, erasures and recoveries.
Importing this package registers the schema of every ``delay`` option.
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
