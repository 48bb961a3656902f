"""The static code of IS-GC's repetition placements: plain sums, a maximum disjoint set.

:class:`RepetitionScheme` is ``is_cr`` and ``is_hr`` on :class:`LinearScheme`: worker
``w`` sends the plain sum of the ``c`` partitions its window holds
(:class:`~gclab.coding.windows.Windows`), so ``B`` is 0/1 with ``c`` ones per row and the
load is ``c/n``. The decoder sums the packets of a maximum set of arrived workers whose
windows do not overlap (:meth:`Windows.maximum`): the whole gradient when they tile all
``n`` partitions (the exact predicate :meth:`Windows.tiles`, which equals least-squares
decodability on every pattern checked), otherwise, with ``network.recovery=partial``,
the exact sum of the partitions they hold, rescaled as every partial scheme's
(:mod:`gclab.coding.partial`). It tolerates every ``c − 1`` erasures (``s = c − 1``): the
windows at starts ``r, r + c, …`` form ``c`` disjoint tilings, and ``c`` erasures, one in
each, stop a decode.
"""

from __future__ import annotations

import numpy as np

from gclab.coding.linear import LinearScheme
from gclab.coding.windows import Windows


class RepetitionScheme(LinearScheme):
    """A :class:`LinearScheme` on IS-GC windows; subclasses validate and set them."""

    exact_predicate = True
    windows: Windows

    def _init_windows(self, windows: Windows) -> None:
        self.windows = windows
        encoding = np.zeros((windows.n, windows.n))
        for w in range(windows.n):
            encoding[w, list(windows.parts(w))] = 1.0
        self._init_linear(windows.n, windows.c - 1, encoding)

    def _arrived(self, survivors: tuple[int, ...]) -> np.ndarray:
        arrived = np.zeros(self.n, dtype=bool)
        arrived[list(survivors)] = True
        return arrived

    def tolerates(self, erasures: np.ndarray) -> bool:
        erased = np.asarray(erasures, dtype=bool).reshape(-1, self.n)[0]
        return self.windows.tiles(~erased)

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        """Weight 1 on the workers of a tiling among ``survivors``, or ``None``."""
        arrived = self._arrived(survivors)
        if not self.windows.tiles(arrived):
            return None
        chosen = set(self.windows.maximum(arrived))
        return np.array([[1.0 if w in chosen else 0.0 for w in survivors]])

    def partial_cover(self, survivors: tuple[int, ...]) -> tuple[int, ...]:
        """The partitions of a maximum set of arrived workers with disjoint windows."""
        chosen = self.windows.maximum(self._arrived(survivors))
        return tuple(sorted(p for w in chosen for p in self.placement[w]))
