"""Trace-driven simulator: schemes and the round protocol without gradients.

:func:`~gclab.sim.engine.simulate` runs jobs through a scheme's symbolic decoder and
the same :class:`~gclab.network.RoundProtocol` the runtime uses;
:mod:`gclab.sim.search` evaluates a scheme's parameter grid; ``python -m gclab.sim`` is
the Hydra app around both.
"""

from gclab.sim import config  # noqa: F401  (registers sim_schema for gclab/conf/sim.yaml)
