"""The fast search's kernels interpreted and compiled, side by side: the budgets of
``gclab.sim.kernels.Tiered``.

In one process with an empty numba cache (``NUMBA_CACHE_DIR``), each kernel runs the
README's search (n = 256, 16 jobs, ``wait_all``, the Lambda trace; the shared server
link's kernel with ``network.server_bandwidth`` set) three ways: interpreted, compiled
for the first time, compiled again. Compiling costs the first compiled run minus the
second; interpreting costs seconds per unit of work (the units ``Tiered`` is given).
Their ratio is the work worth compiling for, printed beside the committed budget.

    python bench/kernel_tiers.py
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import defaultdict

# before numba is imported (``common`` imports gclab): numba reads it once
os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="gclab-numba-")

from common import SHARED, machine

TRACE = SHARED / "traces" / "lambda-sydney-cnn-w256-r20-load000.npz"
N, JOBS = 256, 16


def main() -> None:
    from gclab.network import NetworkConfig
    from gclab.network.trace import Trace
    from gclab.sim import kernels, sgc_kernels
    from gclab.sim.search import scheme_option, search

    seconds: dict[tuple[str, str], float] = defaultdict(float)
    work: dict[str, float] = defaultdict(float)
    run = kernels.Tiered.__call__
    step = ["interpreted"]  # the way the searches run now

    def timed(self: kernels.Tiered, units: float, *args: object) -> kernels.Tier:
        start = time.perf_counter()
        tier = run(self, units, *args)
        seconds[self.kernel.__name__, step[0]] += time.perf_counter() - start
        if step[0] == "interpreted":
            work[self.kernel.__name__] += units
        return tier

    kernels.Tiered.__call__ = timed
    delay = Trace(path=str(TRACE), slope=2.2, base_load=0)
    searches = {
        sgc_kernels.sgc_rounds: (("sr_sgc", "m_sgc"), NetworkConfig(recovery="wait_all")),
        kernels.fair_share_rounds: (
            ("uncoded", "classic_cr"),
            NetworkConfig(recovery="wait_all", bandwidth=1e7, server_bandwidth=4e7),
        ),
    }
    for step[0], tier in (("interpreted",) * 2, ("first", "compiled"), ("again", "compiled")):
        with kernels.forced(tier):
            for names, network in searches.values():
                for name in names:
                    search(scheme_option(name), N, delay, network, JOBS, 0, 1.0, 1e6, None)
    print(f"# {machine()}")
    print(f"# numba cache {os.environ['NUMBA_CACHE_DIR']}; n = {N}, {JOBS} jobs")
    print("| kernel | work (units) | interpreted (s) | µs/unit | compile (s) | compiled run (s) "
          "| worth compiling (units) | budget |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for tiered in searches:
        name = tiered.kernel.__name__
        per_unit = seconds[name, "interpreted"] / work[name]
        compile_s = seconds[name, "first"] - seconds[name, "again"]
        print(
            f"| {name} | {work[name]:.3g} | {seconds[name, 'interpreted']:.3f} "
            f"| {1e6 * per_unit:.2f} | {compile_s:.2f} | {seconds[name, 'again']:.3f} "
            f"| {compile_s / per_unit:.3g} | {tiered.budget:.3g} |"
        )
    shutil.rmtree(os.environ["NUMBA_CACHE_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
