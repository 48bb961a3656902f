"""What IP packet loss does to a message over TCP, measured in the network box.

For every link bandwidth and loss rate, a one-node box (:mod:`gclab.runtime.netbox`)
carries messages of several sizes over one TCP connection from the node to the head, as
a worker's gradient goes; each message is followed by an idle gap (a round's compute),
and timed from its first byte sent to the receiver's one-byte answer. The table gives,
per point, the message's time alone on the link (``size / (bandwidth × goodput)``), the
median and 95th percentile of the measured time, and the extra time's mean: what
``delay=tcp_loss`` models (:mod:`gclab.network.tcp_loss`, fitted to the samples this
writes with ``--out``). The machine's load average is printed beside the table: other
jobs slow the box's packet processing.

    python bench/netns_tcp.py                      # 12.5, 125 MB/s; loss 0, 0.5, 2, 5 %; 4 sizes
    python bench/netns_tcp.py --out tcp.json       # also every sample, for the fit
    python bench/netns_tcp.py --quick              # 12.5 MB/s, loss 0 and 5 %, 1.43 MB: < 1 min
    python bench/netns_tcp.py --fit tcp.json       # fit delay=tcp_loss to the samples

The fit (``--fit``) takes ``timeout`` as the median extra time of the short messages
(< 2 MB) that waited for one retransmission timeout (0.12–0.35 s extra), and chooses the
other parameters (all but ``ip_loss`` and ``mtu``) that bring the model's percentiles
(50, 75, 90, 95, 99) and mean of the message times closest, in log ratio, to the
measured ones at every lossy point (Nelder-Mead on the logarithms). The model's times
are a lossless time measured at the same rate and size plus the model's extra (4000
seeded draws): the lossless time is the clock's bandwidth model's business, not the
loss model's. It prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from scipy.optimize import minimize

from gclab.network.tcp_loss import TcpLoss
from gclab.runtime.netbox import Box, Link, goodput

#: Receives messages (an 8-byte size, then the bytes) on argv[1]:5001 and answers each
#: with one byte.
SINK = """
import socket, sys
s = socket.create_server((sys.argv[1], 5001))
print("ready", flush=True)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    head = c.recv(8, socket.MSG_WAITALL)
    if len(head) < 8:
        break
    left = int.from_bytes(head, "big")
    while left:
        left -= len(c.recv(min(left, 1 << 20)))
    c.sendall(b"k")
"""

#: Sends argv[3] messages of each size in argv[4:] to argv[1]:5001, argv[2] seconds
#: apart; prints one JSON line per message: its size and seconds until the answer.
SOURCE = """
import json, socket, sys, time
c = socket.create_connection((sys.argv[1], 5001))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
gap, reps = float(sys.argv[2]), json.loads(sys.argv[3])
for size, count in zip(map(int, sys.argv[4:]), reps):
    body = size.to_bytes(8, "big") + b"x" * size
    for _ in range(count):
        time.sleep(gap)
        start = time.perf_counter()
        c.sendall(body)
        assert c.recv(1) == b"k"
        print(json.dumps({"size": size, "seconds": time.perf_counter() - start}), flush=True)
"""

#: Gradient sizes: the thin CNN of the tests, half the CNN (a CCE packet with m = 2),
#: the CNN, and ResNet-18 (float32 bytes).
SIZES = (291_944, 713_620, 1_427_240, 44_696_520)


def measure(rate: float, loss: float, sizes: list[int], gap: float, budget: float, mtu: int):
    """Samples ``[{"size", "seconds"}]`` of every size through one link of ``rate``/``loss``."""
    reps = [max(15, min(200, int(budget / (s / rate + gap)))) for s in sizes]
    with Box([Link(rate, loss)], mtu=mtu) as box:
        ns = ["ip", "netns", "exec"]
        sink = subprocess.Popen(
            [*ns, box.head, sys.executable, "-c", SINK, box.address(0)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert sink.stdout.readline().strip() == "ready"
            args = [box.address(0), str(gap), json.dumps(reps), *map(str, sizes)]
            out = subprocess.run(
                [*ns, box.nodes[0], sys.executable, "-c", SOURCE, *args],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
        finally:
            sink.kill()
            sink.wait()
    return [json.loads(line) for line in out.splitlines()]


#: The percentiles of a point's message times that the fit matches (and the mean).
QUANTILES = (50, 75, 90, 95, 99)
#: The model's parameters the fit chooses by Nelder-Mead, and where it starts.
FITTED = {"fast_frames": 3.0, "fast_seconds": 0.001, "tail": 2.0, "resend": 0.5}
#: A lone message: one TCP flow, its timeouts counted without chains (the form fitted).
LONE = {"streams": 1, "chains": False}
#: Extra seconds of a message's one timeout, at most (about one RTO above RTO_min, 0.2 s,
#: where two timeouts are not yet possible).
ONE_TIMEOUT = (0.12, 0.35)
#: Messages short enough that a timeout stands out from the rest of their extra time.
SHORT = 2e6


def summary(times: np.ndarray) -> np.ndarray:
    return np.append(np.percentile(times, QUANTILES), times.mean())


def model_times(params: dict, point: tuple, lossless: np.ndarray, draws: int = 4000):
    """Message times the model gives at ``point`` = (rate, loss, size, mtu): a lossless
    time measured at the same rate and size (what the clock's bandwidth already models)
    plus the model's extra, seeded."""
    rate, loss, size, mtu = point
    rng = np.random.default_rng(0)
    model = TcpLoss(ip_loss=loss, mtu=mtu, **LONE, **params)
    extra = model.extra(rng, np.full(draws, float(size)), rate * goodput(mtu))
    return rng.choice(lossless, draws) + extra


def fit(samples: list[dict]) -> None:
    """Fit and print ``tcp_loss``'s parameters against the lossy points of ``samples``."""
    points: dict[tuple, list[float]] = {}
    for s in samples:
        points.setdefault((s["rate"], s["loss"], s["size"], s["mtu"]), []).append(s["seconds"])
    lossless = {(r, size, mtu): np.array(t) for (r, p, size, mtu), t in points.items() if p == 0}
    measured = {point: summary(np.array(t)) for point, t in points.items() if point[1] > 0}
    extra = np.concatenate([
        np.array(t) - size / (rate * goodput(mtu))
        for (rate, loss, size, mtu), t in points.items() if loss > 0 and size < SHORT
    ])  # fmt: skip
    timeout = float(np.median(extra[(extra > ONE_TIMEOUT[0]) & (extra < ONE_TIMEOUT[1])]))
    names = list(FITTED)

    def base(point: tuple) -> np.ndarray:
        return lossless[point[0], point[2], point[3]]

    def error(logs: np.ndarray) -> float:
        params = {**dict(zip(names, np.exp(logs))), "timeout": timeout}
        return sum(
            float(np.sum(np.log(summary(model_times(params, point, base(point))) / want) ** 2))
            for point, want in measured.items()
        )

    start = np.log(list(FITTED.values()))
    best = minimize(error, start, method="Nelder-Mead", options={"maxiter": 800, "xatol": 1e-3})
    params = {**dict(zip(names, np.exp(best.x))), "timeout": timeout}
    print(f"# timeout: the median extra time of the short messages with one, {timeout:.4f} s")
    print("# fitted: " + " ".join(f"{k}={v:.4g}" for k, v in params.items()))
    print(f"# sum of squared log ratios: {best.fun:.2f} (at the start {error(start):.2f})")
    print(f"{'MB/s':>6} {'loss':>6} {'MB':>7}  measured/model: "
          + " ".join(f"{f'p{q}':>13}" for q in QUANTILES) + f" {'mean':>13}")  # fmt: skip
    for point, want in sorted(measured.items()):
        got = summary(model_times(params, point, base(point)))
        cells = " ".join(f"{w:6.3f}/{g:6.3f}" for w, g in zip(want, got))
        print(f"{point[0] / 1e6:6.1f} {point[1]:6.3f} {point[2] / 1e6:7.3f}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[1.25e7, 1.25e8])
    parser.add_argument("--losses", type=float, nargs="+", default=[0.0, 0.005, 0.02, 0.05])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--gap", type=float, default=0.25, help="idle seconds between messages")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per size and point")
    parser.add_argument("--mtu", type=int, default=9000)
    parser.add_argument("--out", help="write every sample here (JSON)")
    parser.add_argument("--fit", help="fit delay=tcp_loss to the samples in this file")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.fit:
        with open(args.fit) as f:
            fit(json.load(f))
        return
    if args.quick:
        args.rates, args.losses, args.sizes, args.budget = [1.25e7], [0.0, 0.05], [1_427_240], 8
    print(f"# load average {os.getloadavg()[0]:.1f}; mtu {args.mtu}; gap {args.gap} s")
    print(f"{'MB/s':>6} {'loss':>6} {'MB':>7} {'n':>4} {'alone s':>8} {'median s':>9} "
          f"{'p95 s':>8} {'extra mean s':>13}")  # fmt: skip
    samples = []
    for rate in args.rates:
        for loss in args.losses:
            got = measure(rate, loss, args.sizes, args.gap, args.budget, args.mtu)
            for size in args.sizes:
                t = np.array([s["seconds"] for s in got if s["size"] == size])
                alone = size / (rate * goodput(args.mtu))
                print(
                    f"{rate / 1e6:6.1f} {loss:6.3f} {size / 1e6:7.3f} {len(t):4d} {alone:8.4f} "
                    f"{np.median(t):9.4f} {np.percentile(t, 95):8.4f} {np.mean(t) - alone:13.4f}"
                )
            samples += [{**s, "rate": rate, "loss": loss, "mtu": args.mtu} for s in got]
        print(f"# load average {os.getloadavg()[0]:.1f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(samples, f)


if __name__ == "__main__":
    main()
