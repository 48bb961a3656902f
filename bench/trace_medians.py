"""The shared Lambda traces' median time per load: where the simulator's default compute comes from.

    python bench/trace_medians.py

Prints, for Sydney, Tokyo and both together, the median of every worker's duration in
every round at each recorded load (0 = one sample, 1 = the whole batch gradient), and a
line fitted through them. ``sim.unit_time``'s default (:data:`gclab.sim.engine.UNIT_TIME`,
compute seconds per unit load for a delay model without compute of its own) is the
median at load 1 over both regions, rounded: what a worker computing a whole batch
gradient takes. Skipped when ``../shared/traces`` is absent.
"""

from __future__ import annotations

import numpy as np

from gclab import CONF_DIR
from gclab.sim.engine import UNIT_TIME

TRACES = CONF_DIR.parents[2] / "shared" / "traces"
LOADS = (0, 25, 50, 75, 100)  # the recorded loads, in hundredths
REGIONS = ("sydney", "tokyo", "both")


def durations(region: str, load: int) -> np.ndarray:
    """Every worker's duration in every round of ``region``'s trace at ``load`` (or both's)."""
    pattern = f"lambda-{'*' if region == 'both' else region}-cnn-w256-r*-load{load:03d}.npz"
    return np.concatenate([np.load(p)["durations"].ravel() for p in sorted(TRACES.glob(pattern))])


def main() -> None:
    if not TRACES.is_dir():
        raise SystemExit(f"no shared traces under {TRACES}")
    loads = np.array(LOADS) / 100
    print("| region | " + " | ".join(f"load {load:g}" for load in loads) + " | fit |")
    print("|---" * (len(LOADS) + 2) + "|")
    medians = {}
    for region in REGIONS:
        medians[region] = np.array([np.median(durations(region, load)) for load in LOADS])
        slope, base = np.polyfit(loads, medians[region], 1)
        cells = " | ".join(f"{m:.3f}" for m in medians[region])
        print(f"| {region} | {cells} | {base:.2f} s + {slope:.3f} s × load |")
    at_one = medians["both"][-1]
    print(f"\nmedian at load 1, both regions: {at_one:.3f} s; sim.unit_time's default: {UNIT_TIME}")


if __name__ == "__main__":
    main()
