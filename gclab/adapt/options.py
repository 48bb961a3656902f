"""The ``adapt`` config group: ``off`` (the default) and ``search``.

Both apps compose it; the options' schemas are derived from these constructors
(:func:`gclab.schemas.register`) and every value is checked here, so a bad one fails in
one sentence before anything starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from gclab.errors import ConfigError
from gclab.schemas import register


class Off:
    """``adapt=off``: the configured scheme runs the whole run."""

    enabled = False


class Search:
    """``adapt=search``: re-choose the scheme every ``every`` jobs (docs/simulator.md).

    ``window``: the rounds whose observed arrival times the search replays; no decision
    is taken before that many rounds ran. ``schemes``: the scheme options to choose
    among (``null``: the configured scheme's family, its other parameters kept).
    ``slack``: among the settings within this fraction of the fastest on the window,
    take the one with the highest load (redundancy that cost at most ``slack`` on what
    was observed, against stragglers the window has not shown yet). ``margin``: switch
    only when that setting is faster on the window than the current one by more than
    this fraction (hysteresis against noise).
    """

    enabled = True

    def __init__(
        self,
        every: int = 2,
        window: int = 10,
        schemes: Sequence[str] | None = None,
        slack: float = 0.02,
        margin: float = 0.05,
    ) -> None:
        for key, value in (("every", every), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"adapt.{key}={value!r} is invalid: it must be an integer >= 1.")
        for key, value in (("slack", slack), ("margin", margin)):
            if not 0 <= value < 1:
                raise ConfigError(f"adapt.{key}={value!r} is invalid: it must be in [0, 1).")
        if schemes is not None and not schemes:
            raise ConfigError(
                "adapt.schemes=[] is invalid: give at least one scheme option, or null for "
                "the configured scheme's family."
            )
        self.every = every
        self.window = window
        self.schemes = None if schemes is None else [str(name) for name in schemes]
        self.slack = float(slack)
        self.margin = float(margin)

    def check(self, jobs: int, key: str) -> None:
        """Raise :class:`ConfigError` if the window is longer than a run of ``jobs`` jobs
        (``key``: the setting that gave the number of jobs)."""
        if self.window > jobs:
            raise ConfigError(
                f"adapt.window={self.window} is longer than the run ({key}={jobs} jobs): "
                "use a window of at most the run's jobs."
            )


register("adapt", "off", Off)
register("adapt", "search", Search)
