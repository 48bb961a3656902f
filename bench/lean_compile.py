"""Search time of the SGC round loop compiled lean (``-O1``, no loop vectorization, as
``gclab.sim.kernels.lean_compile`` compiles it) and at numba's ``-O3``, side by side.

Each build runs in its own process with its own empty numba cache (a cached kernel keeps
the code it was compiled to): the full grids of sr_sgc and m_sgc at n = 256 on the
Lambda trace, ``--jobs`` jobs, both recovery modes, warm (compiled first), best of 3.

    python bench/lean_compile.py             # 400 jobs
    python bench/lean_compile.py --jobs 100
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

from common import SHARED, machine

TRACE = SHARED / "traces" / "lambda-sydney-cnn-w256-r20-load000.npz"
SCHEMES = ("sr_sgc", "m_sgc")
RECOVERIES = ("wait_all", "decodable")


def measure(lean: bool, jobs: int) -> dict[str, float]:
    """``{"<scheme>/<recovery>": best seconds}`` of one build, in this process."""
    from gclab.network import NetworkConfig
    from gclab.network.trace import Trace
    from gclab.sim import kernels
    from gclab.sim.fast import load_kernels
    from gclab.sim.search import scheme_option, search

    if not lean:
        kernels.lean_compile = contextlib.nullcontext  # numba's own settings
    delay = Trace(path=str(TRACE), slope=2.2, base_load=0)
    out = {}
    for recovery in RECOVERIES:
        network = NetworkConfig(recovery=recovery)
        load_kernels(list(SCHEMES), network)
        for name in SCHEMES:
            node, best = scheme_option(name), []
            for _ in range(3):
                start = time.perf_counter()
                trials = search(node, 256, delay, network, jobs, 0, 1.0, 0.0, None)
                best.append(time.perf_counter() - start)
            out[f"{name}/{recovery} ({len(trials)} settings)"] = min(best)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=400, help="jobs each setting runs")
    parser.add_argument("--child", choices=("lean", "o3"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child == "lean", args.jobs)))
        return
    results = {}
    for build in ("lean", "o3"):
        with tempfile.TemporaryDirectory() as cache:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", build, "--jobs", str(args.jobs)],
                env={**os.environ, "NUMBA_CACHE_DIR": cache},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
        results[build] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"# {machine()}")
    print("| search | `-O1`, no loop vectorization (s) | `-O3` (s) |")
    print("|---|---|---|")
    for key in results["lean"]:
        print(f"| {key} | {results['lean'][key]:.3f} | {results['o3'][key]:.3f} |")


if __name__ == "__main__":
    main()
