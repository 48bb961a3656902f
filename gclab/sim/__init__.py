"""Trace-driven simulator: schemes and the round protocol without gradients.

:func:`~gclab.sim.engine.simulate` runs jobs through a scheme's symbolic decoder and
the same :class:`~gclab.network.RoundProtocol` the runtime uses;
:mod:`gclab.sim.search` evaluates a scheme's parameter grid, the SGC papers' four schemes
through the compiled fast path of :mod:`gclab.sim.fast`; :mod:`gclab.sim.public` reads
the public SGC simulator's reference totals; ``python -m gclab.sim`` is the Hydra app
around them.
"""

from gclab.sim import config  # noqa: F401  (registers sim_schema for gclab/conf/sim.yaml)
