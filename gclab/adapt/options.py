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
    """``adapt=search``: re-choose the scheme online (docs/simulator.md, "Adaptive coding").

    ``every``: decide at every ``every``-th job boundary, and after any round that
    waited. ``window``: the rounds whose observed arrival times the search replays at a
    decision (no decision before that many rounds ran); it yields what each of them
    would have cost every setting. ``memories``: lengths, in rounds, of the memories
    that score the settings on those costs; ``judge``: half-life, in rounds, of the
    past on which the memories' own picks are compared to decide which memory to trust
    (:mod:`gclab.adapt.memory`). ``schemes``:
    the scheme options to choose among (``null``: the configured scheme's family, its
    other parameters kept). ``slack``: among the settings within this fraction of the
    fastest, take the one with the highest load (redundancy that cost at most
    ``slack`` on what was observed, against stragglers not seen yet); a pick more
    redundant than the current setting is switched to at once. ``margin``: switch to
    a less redundant pick only when it is faster than the current setting by more than
    this fraction (hysteresis: noise does not trade redundancy away); a shorter memory
    is trusted over a longer one only when its picks cost less by more than this.
    """

    enabled = True

    def __init__(
        self,
        every: int = 1,
        window: int = 10,
        schemes: Sequence[str] | None = None,
        slack: float = 0.03,
        margin: float = 0.02,
        memories: Sequence[int] = (10, 20, 40, 80),
        judge: float = 20.0,
    ) -> None:
        for key, value in (("every", every), ("window", window)):
            if not _count(value):
                raise ConfigError(f"adapt.{key}={value!r} is invalid: it must be an integer >= 1.")
        if not memories or not all(_count(length) for length in memories):
            raise ConfigError(
                f"adapt.memories={list(memories)!r} is invalid: give one or more lengths in "
                "rounds, each an integer >= 1."
            )
        if isinstance(judge, bool) or not isinstance(judge, (int, float)) or not judge > 0:
            raise ConfigError(
                f"adapt.judge={judge!r} is invalid: it must be a half-life in rounds > 0."
            )
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
        self.memories = [int(length) for length in memories]
        self.judge = float(judge)
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


def _count(value: object) -> bool:
    """Whether ``value`` is an integer >= 1 (a bool is not)."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1


register("adapt", "off", Off)
register("adapt", "search", Search)
