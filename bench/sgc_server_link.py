"""The SGC papers' ranking with a communication term: 256 packets a round on one server link.

    python bench/sgc_server_link.py             # 480 jobs per run
    python bench/sgc_server_link.py --quick     # 48 jobs

The papers' simulator (mamaj/Sequential-Gradient-Coding-2) has no communication term: a
round lasts the recorded Lambda durations (rescaled by load), whatever the workers
send. Here the same four settings (uncoded; GC s = 15, ``classic_cr``; SR-SGC
(B, W, λ) = (2, 3, 23); M-SGC (1, 2, 27), whose packets carry T + 1 = 2 gradient-sized
slots) run on the shared Lambda traces (load 0, the papers' slope 2.2 s per unit load,
μ = 1, replayed with wrap-around) with every round's packets crossing one server ingress
shared fairly by the packets in flight (``network.server_bandwidth``: unlimited, 10 Gb/s,
1 Gb/s), at the payloads of the small CNN and of ResNet-18 (CIFAR variant), under the
papers' rule (``network.recovery=wait_all``) and gclab's (``decodable``). Each cell is
the total time and its ratio to GC's; the last column ranks the schemes.
Skipped when ``../shared/traces`` is absent.
"""

from __future__ import annotations

import argparse

from gclab import CONF_DIR
from gclab.coding.classic import ClassicCR
from gclab.coding.m_sgc import MSGC
from gclab.coding.sr_sgc import SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import PAYLOAD_BYTES, simulate

TRACES = CONF_DIR.parents[2] / "shared/traces"
REGIONS = {"tokyo": "lambda-tokyo-cnn-w256-r10-load000.npz",
           "sydney": "lambda-sydney-cnn-w256-r20-load000.npz"}  # fmt: skip
N = 256
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
    parser.add_argument("--jobs", type=int, default=480)
    parser.add_argument("--quick", action="store_true", help="48 jobs")
    args = parser.parse_args()
    jobs = 48 if args.quick else args.jobs
    if not all((TRACES / f).is_file() for f in REGIONS.values()):
        print(f"skipped: no traces in {TRACES}")
        return
    print(f"n={N}, {jobs} jobs, load-0 traces, slope 2.2, mu=1; total seconds (ratio to GC)\n")
    names = list(SCHEMES)
    print("| trace | recovery | payload | server link | " + " | ".join(names) + " | ranking |")
    print("|---" * (len(names) + 5) + "|")
    for region, file in REGIONS.items():
        delay = Trace(str(TRACES / file), slope=2.2, base_load=0.0)
        for recovery in ("wait_all", "decodable"):
            for payload_name, payload in PAYLOADS.items():
                for server_name, server in SERVERS.items():
                    network = NetworkConfig(mu=1.0, recovery=recovery, server_bandwidth=server)
                    total = {
                        name: simulate(scheme, delay, network, jobs, 0, 0.0, payload).total_time
                        for name, scheme in SCHEMES.items()
                    }
                    gc = total["GC s=15"]
                    cells = [f"{total[x]:.1f} ({total[x] / gc:.2f})" for x in names]
                    ranking = " < ".join(sorted(names, key=total.get))
                    print(
                        f"| {region} | {recovery} | {payload_name} | {server_name} | "
                        + " | ".join(cells) + f" | {ranking} |",
                        flush=True,
                    )  # fmt: skip


if __name__ == "__main__":
    main()
