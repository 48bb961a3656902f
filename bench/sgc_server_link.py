"""The SGC papers' ranking with a communication term: 256 packets a round on one server link.

    python bench/sgc_server_link.py             # 496 jobs per run, the papers' rule
    python bench/sgc_server_link.py --quick     # 48 jobs
    python bench/sgc_server_link.py --recovery wait_all decodable

The papers' simulator (mamaj/Sequential-Gradient-Coding-2) has no communication term: a
round lasts the recorded Lambda durations (rescaled by load), whatever the workers
send. Here their four settings (uncoded; GC s = 15, ``classic_cr``; SR-SGC
(B, W, λ) = (2, 3, 23); M-SGC (1, 2, 27), whose packets carry T + 1 = 2 gradient-sized
slots) run as ``bench/sgc_traces.py`` evaluates (table 3): on each region's four
evaluation traces (recorded at load 0.25–1, rescaled from their own load by the slope
fitted over the region's five traces), μ = 1, wrap-around replay, with every round's
packets crossing one server ingress shared fairly by the packets in flight
(``network.server_bandwidth``: unlimited, 10 Gb/s, 1 Gb/s), at the payloads of the
small CNN and of ResNet-18 (CIFAR variant). Each cell is the mean total time over the
four traces and its ratio to GC's; the last column ranks the schemes.
Skipped when ``../shared/traces`` is absent.
"""

from __future__ import annotations

import argparse

import numpy as np
from sgc_traces import LOADS, MODES, REGIONS, N, fitted_slope, trace_path

from gclab.coding.classic import ClassicCR
from gclab.coding.m_sgc import MSGC
from gclab.coding.sr_sgc import SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import PAYLOAD_BYTES, simulate

SCHEMES = {
    "uncoded": Uncoded(N),
    "GC s=15": ClassicCR(N, 15),
    "SR-SGC (2,3,23)": SRSGC(N, 2, 3, 23),
    "M-SGC (1,2,27)": MSGC(N, 1, 2, 27),
}
#: Gradient bytes: the small CNN's (the simulator's default) and ResNet-18's (model=resnet18).
PAYLOADS = {"small CNN": PAYLOAD_BYTES, "ResNet-18": 4.0 * 11_173_962}
SERVERS = {"unlimited": None, "10 Gb/s": 1.25e9, "1 Gb/s": 1.25e8}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=496)
    parser.add_argument("--quick", action="store_true", help="48 jobs")
    parser.add_argument("--recovery", nargs="+", choices=MODES, default=["wait_all"])
    args = parser.parse_args()
    jobs = 48 if args.quick else args.jobs
    if not all(trace_path(r, load).is_file() for r in REGIONS for load in LOADS):
        print("skipped: the shared traces are missing")
        return
    print(f"n={N}, {jobs} jobs, mu=1; mean total seconds over the four traces (ratio to GC)\n")
    names = list(SCHEMES)
    print("| region | recovery | payload | server link | " + " | ".join(names) + " | ranking |")
    print("|---" * (len(names) + 5) + "|")
    for region in REGIONS:
        slope = fitted_slope(region)
        delays = [Trace(str(trace_path(region, load)), slope) for load in LOADS[1:]]
        for recovery in args.recovery:
            for payload_name, payload in PAYLOADS.items():
                for server_name, server in SERVERS.items():
                    network = NetworkConfig(mu=1.0, recovery=recovery, server_bandwidth=server)
                    total = {
                        name: float(np.mean([
                            simulate(scheme, delay, network, jobs, 0, 0.0, payload).total_time
                            for delay in delays
                        ]))
                        for name, scheme in SCHEMES.items()
                    }  # fmt: skip
                    gc = total["GC s=15"]
                    cells = [f"{total[x]:.0f} ({total[x] / gc:.2f})" for x in names]
                    ranking = " < ".join(sorted(names, key=total.get))
                    print(
                        f"| {region} (slope {slope:.3f}) | {recovery} | {payload_name} | "
                        f"{server_name} | " + " | ".join(cells) + f" | {ranking} |",
                        flush=True,
                    )  # fmt: skip


if __name__ == "__main__":
    main()
