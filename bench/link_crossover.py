"""Where bytes decide: classic_cr against cce_cr (m = 2) at equal s, across link speeds.

    python bench/link_crossover.py            # 100 jobs per run
    python bench/link_crossover.py --jobs 30  # quicker

CCE-GC (Ye & Abbe, ICML 2018) computes more per worker (load (s+m)/n against (s+1)/n)
to send m-fold smaller packets. On the clock without bytes that can only lose; with
bytes on, it wins once the wire costs more than the extra compute. Both schemes run at
n = 256, s = 15 (the SGC papers' GC), on the shared Lambda traces (the stragglers; compute
scales with load at the papers' 2.2 s per unit load), with the small CNN's and
ResNet-18's gradients (CIFAR variant, 11.17 M floats) as payload, each worker's uplink
from 1 MB/s to unlimited, the server's ingress unlimited or a 10 Gb/s link shared by the
packets in flight (``network.server_bandwidth=1.25e9``), ``network.recovery=decodable``,
μ = 1. The ratio is cce_cr's total time over classic_cr's: below 1, CCE is faster.
Skipped when ``../shared/traces`` is absent.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gclab import CONF_DIR
from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import PAYLOAD_BYTES, simulate

TRACES = CONF_DIR.parents[2] / "shared/traces"
REGIONS = ("lambda-sydney-cnn-w256-r20-load000.npz", "lambda-tokyo-cnn-w256-r10-load000.npz")
N, S = 256, 15
#: Gradient bytes: the small CNN's (the simulator's default) and ResNet-18's (model=resnet18).
PAYLOADS = {"small CNN": PAYLOAD_BYTES, "ResNet-18": 4.0 * 11_173_962}
UPLINKS = (1e6, 3e6, 1e7, 3e7, 1e8, 3e8, 1e9, None)
SERVERS = {"unlimited": None, "10 Gb/s shared": 1.25e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    if not (TRACES / REGIONS[0]).is_file():
        print(f"skipped: no traces in {TRACES}")
        return
    schemes = {"classic_cr": ClassicCR(N, S), "cce_cr": CCECR(N, S, 2)}
    print(f"n={N}, s={S}, m=2, {args.jobs} jobs, trace slope 2.2, mu=1, recovery=decodable\n")
    print("| trace | payload | server link | uplink (B/s) | classic_cr (s) | cce_cr (s) "
          "| cce/classic | faster |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for region in REGIONS:
        delay = Trace(str(TRACES / region), slope=2.2, base_load=0.0)
        for payload_name, payload in PAYLOADS.items():
            for server_name, server in SERVERS.items():
                for uplink in UPLINKS:
                    network = NetworkConfig(mu=1.0, bandwidth=uplink, server_bandwidth=server)
                    total = {
                        name: simulate(scheme, delay, network, args.jobs, 0, 0.0, payload)
                        for name, scheme in schemes.items()
                    }
                    a, b = total["classic_cr"].total_time, total["cce_cr"].total_time
                    faster = "cce_cr" if b < a else "classic_cr" if a < b else "tie"
                    speed = "unlimited" if uplink is None else f"{uplink:.0e}"
                    print(
                        f"| {Path(region).stem.split('-')[1]} | {payload_name} | {server_name} | "
                        f"{speed} | {a:.1f} | {b:.1f} | {b / a:.3f} | {faster} |"
                    )


if __name__ == "__main__":
    main()
