"""The virtual clock against the network box: the same configs, measured beside predicted.

Each grid point (scheme, IP loss, link bandwidth, n, model) trains twice:

* **box**: ``cluster=netns`` with 2 nodes (n/2 workers each) behind links of
  ``cluster.link.bandwidth`` bytes/s each way that lose ``cluster.link.loss`` of the IP
  packets, on the wall clock: what the rounds really take over TCP through Ray;
* **virtual**: ``cluster=local`` on the virtual clock with the ``network.*`` settings
  that match the box (:func:`matching`): each worker's uplink its share of its node's
  link, the weights' broadcast one copy per node over the node's link, the links' TCP
  goodput; one actor per worker timed by the wall (``cluster.compute_time=wall``, the
  box's workers compete for the same cores).

Each prediction is the round protocol run on recorded compute times
(:func:`gclab.study.replay.replay_rounds`) under one delay model: ``none`` (the clock
with bytes, no loss model), ``tcp_loss`` with ``ip_loss`` = the box's loss and its
``nodes`` (the model fitted to TCP, :mod:`gclab.network.tcp_loss`) and the papers'
erasure model, ``bernoulli`` with ``p`` = the loss and ``network.rto=0.5``; and on two
sets of compute times: the box run's own (``worker_s``: what each worker measured of its compute, so
that the prediction differs from the box only in the network) and the virtual run's
(``none`` on them is the virtual run itself). Per point and model the table gives the
median and 95th percentile round (the first, warm-up round left out) and their ratios
to the box's, the rounds that waited, and bytes per round (box: what the nodes' links
carried up, retransmitted packets included; clock: the packets it charges). The load
average before each box run is printed beside it: other jobs on the machine slow both
runs, and not alike.

    python bench/netns_clock.py                # 4 schemes x 4 losses x 2 rates x n=4,8 x 2 models
    python bench/netns_clock.py --models cnn --out grid.jsonl   # resumable: skips points done
    python bench/netns_clock.py --quick        # classic_fr, n=4, cnn, 12.5 MB/s, loss 0 and 2 %
    python bench/netns_clock.py --report grid.jsonl   # the points again, models predicted anew
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import compose_config
from hydra.utils import instantiate

from gclab.network import NetworkConfig, RoundOutcome, RoundProtocol
from gclab.runtime.netbox import goodput
from gclab.study.replay import recorded_server_time, replay_rounds
from gclab.tracking.artifacts import read_metrics

ROOT = Path(__file__).resolve().parents[1]
SCHEMES = ("classic_fr", "classic_cr", "pipelined_fr", "cce_cr")
LOSSES = (0.0, 0.005, 0.02, 0.05)
RATES = (1.25e7, 1.25e8)
NODES = 2
MTU = 9000
#: The erasure model's retransmission timeout (the study's setting).
ERASURE_RTO = 0.5
#: Delay models the virtual run is replayed under, by name: overrides for a loss ``p``.
MODELS = {
    "none": lambda p: ["delay=none"],
    "tcp_loss": lambda p: [
        "delay=tcp_loss",
        f"delay.ip_loss={p}",
        f"delay.mtu={MTU}",
        f"delay.nodes={NODES}",
    ],
    "bernoulli": lambda p: ["delay=bernoulli", f"delay.p={p}", f"network.rto={ERASURE_RTO}"],
}


def common(scheme: str, n: int, model: str, rounds: int) -> list[str]:
    return [
        f"scheme={scheme}", f"cluster.workers={n}", f"model={model}", f"train.rounds={rounds}",
        "data=synthetic", "data.train_size=2048", "data.test_size=256", "train.eval_every=0",
        "train.checkpoint_every=0", "logger=none",
        "cluster.timeout=600",  # actors that import torch on a loaded machine take minutes
    ]  # fmt: skip


def matching(n: int, rate: float) -> list[str]:
    """The virtual clock's ``network.*`` for the box: n/NODES workers share a node's link
    (each packet gets its share when they send together), every node fetches one copy of
    the weights over its own link (as fast as ``n`` copies through one link ``n`` times
    faster), and TCP's payload is ``goodput`` of the link's bytes."""
    payload_rate = rate * goodput(MTU)
    return [
        f"network.bandwidth={payload_rate * NODES / n}",
        f"network.broadcast_bandwidth={payload_rate * n}",
    ]


def in_box(base: list[str], rate: float, loss: float) -> list[str]:
    """``base`` on the box: NODES nodes behind links of ``rate`` bytes/s that lose ``loss``
    of the IP packets, on the wall clock."""
    return [
        *base, "cluster=netns", f"cluster.nodes={NODES}", f"cluster.link.bandwidth={rate}",
        f"cluster.link.loss={loss}", f"cluster.mtu={MTU}", "network.clock=wall",
        "cluster.compute_time=wall",
    ]  # fmt: skip


def on_clock(base: list[str], n: int, rate: float) -> list[str]:
    """``base`` on the virtual clock with the box's links (:func:`matching`)."""
    return [*base, "cluster=local", f"cluster.actors={n}", "cluster.compute_time=wall",
            *matching(n, rate)]  # fmt: skip


#: What Ray says when a private Ray's raylet misses its fixed 30 s to register (a busy
#: machine): the run is tried again, in a fresh directory.
RAYLET_SLOW = "The current node timed out during startup"


def train(args: list[str], out: Path, tries: int = 3) -> tuple[list[dict], dict]:
    """``python -m gclab args`` into ``out-<try>``: its round records and summary."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    for attempt in range(tries):
        run_dir = out.with_name(f"{out.name}-{attempt}")
        proc = subprocess.run(
            [sys.executable, "-m", "gclab", *args, f"hydra.run.dir={run_dir}"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode == 0 or RAYLET_SLOW not in proc.stderr:
            break
    if proc.returncode != 0:
        raise RuntimeError(f"gclab {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    rounds = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "round"]
    return rounds, json.loads((run_dir / "summary.json").read_text())


def replayed(
    overrides: list[str], compute: np.ndarray, server: np.ndarray, jobs: int
) -> tuple[RoundProtocol, list[RoundOutcome]]:
    """Rounds of ``compute[r, w]`` seconds (and ``server[r]`` seconds of the server's work)
    on the virtual clock of ``overrides``, with its delay model: the protocol and each
    round's outcome."""
    cfg = compose_config(overrides)
    scheme = instantiate(cfg.scheme, n=cfg.cluster.workers)
    model = instantiate(cfg.model, num_classes=10)
    payload = 4 * sum(p.numel() for p in model.parameters())
    network = NetworkConfig(**cfg.network)
    protocol = RoundProtocol(network, instantiate(cfg.delay), scheme.n, cfg.seed, payload=payload)
    out = replay_rounds(scheme, protocol, compute, jobs, server=server)
    return protocol, [r.outcome for r in out.rounds]


def replay(overrides: list[str], compute: np.ndarray, server: np.ndarray, jobs: int) -> list[dict]:
    """:func:`replayed`'s rounds: duration, bytes and whether they waited."""
    outcomes = replayed(overrides, compute, server, jobs)[1]
    return [{"round_time": o.duration, "bytes": o.bytes, "waited": o.waited} for o in outcomes]


def stats(rounds: list[dict]) -> dict[str, float]:
    """Median and 95th percentile round (the first left out), bytes per round, waits."""
    t = np.array([r["round_time"] for r in rounds[1:]])
    return {
        "median": float(np.median(t)),
        "p95": float(np.percentile(t, 95)),
        "bytes": float(np.mean([r["bytes"] for r in rounds])),
        "waited": int(sum(r["waited"] for r in rounds)),
    }


def point(
    scheme: str, loss: float, rate: float, n: int, model: str, rounds: int, virtual_run: bool
) -> dict:
    """Train one grid point on the box and (``virtual_run``) on the virtual clock; every
    model's numbers, on the box's own compute times and on the virtual run's."""
    base = common(scheme, n, model, rounds)
    load = os.getloadavg()[0]
    virtual = on_clock(base, n, rate)
    with tempfile.TemporaryDirectory() as tmp:
        box_rounds, summary = train(in_box(base, rate, loss), Path(tmp) / "box")
        virtual_rounds = train(virtual, Path(tmp) / "virtual")[0] if virtual_run else None
    up = sum(node["up_bytes"] for node in summary["link_traffic"]) / len(box_rounds)
    lost = sum(node["up_lost"] + node["down_lost"] for node in summary["link_traffic"])
    result = {
        "scheme": scheme, "loss": loss, "rate": rate, "n": n, "model": model,
        "rounds": rounds, "load": load,
        "box": {**stats(box_rounds), "bytes": up, "ip_lost": lost,
                "round_times": [r["round_time"] for r in box_rounds]},  # netns_long.py
        "worker_nodes": summary["worker_nodes"],  # which workers shared a node's link
    }  # fmt: skip
    sources = {"on_box": (box_rounds, "worker_s")}
    if virtual_rounds is not None:
        result["virtual_run"] = stats(virtual_rounds)
        sources["on_virtual"] = (virtual_rounds, "compute_s")
    result["timeline_box"] = [r.get("timeline") for r in box_rounds]  # where its time went
    for source, (recorded, key) in sources.items():  # kept: a refitted model replays them
        result[f"recorded_{source}"] = {
            "compute": [r[key] for r in recorded],
            "server": recorded_server_time(recorded).tolist(),
        }
    return predict(result)


def predict(result: dict) -> dict:
    """``result`` with every model's numbers on each set of its recorded compute times."""
    loss, n, rate, rounds = result["loss"], result["n"], result["rate"], result["rounds"]
    virtual = on_clock(common(result["scheme"], n, result["model"], rounds), n, rate)
    for name, delay in MODELS.items():
        if name != "none" and loss == 0:
            continue
        for source in ("on_box", "on_virtual"):
            recorded = result.get(f"recorded_{source}")
            if recorded is None:
                continue
            compute, server = np.array(recorded["compute"]), np.array(recorded["server"])
            result[f"{name}_{source}"] = stats(
                replay([*virtual, *delay(loss)], compute, server, rounds)
            )
    return result


def rows(result: dict) -> list[str]:
    """Markdown rows of a point: the box beside each model, on each compute source."""
    box = result["box"]
    head = [
        result["scheme"], str(result["n"]), result["model"], f"{result['rate'] / 1e6:g}",
        f"{100 * result['loss']:g}", f"{result['load']:.1f}",
        f"{box['median']:.3f} / {box['p95']:.3f}", str(box["waited"]),
        f"{box['bytes'] / 1e6:.2f}",
    ]  # fmt: skip
    out = []
    for name in MODELS:
        cells = [name]
        on_box = result.get(f"{name}_on_box")
        if on_box is None:
            continue
        for source in ("on_box", "on_virtual"):
            got = result.get(f"{name}_{source}")
            if got is None:
                cells.append("–")
                continue
            ratio = f"×{got['median'] / box['median']:.2f} / ×{got['p95'] / box['p95']:.2f}"
            cells.append(f"{got['median']:.3f} / {got['p95']:.3f} ({ratio})")
        cells += [str(on_box["waited"]), f"{on_box['bytes'] / 1e6:.2f}"]
        out.append("| " + " | ".join(head + cells) + " |")
    return out


HEADER = (
    "| scheme | n | model | MB/s | loss % | load | box median / p95 s | box waited "
    "| box MB up per round | model | on the box's compute: median / p95 s (× box) "
    "| on the virtual run's | waited (on the box's) | clock MB per round |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES))
    parser.add_argument("--losses", type=float, nargs="+", default=list(LOSSES))
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of a cnn point")
    parser.add_argument("--resnet-rounds", type=int, default=6, help="rounds of a resnet18 point")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--virtual-runs", choices=("all", "lossless"), default="all",
        help="train the virtual run at every point, or only at those without loss (the "
        "lossy ones are then predicted on the box's compute alone)",
    )  # fmt: skip
    parser.add_argument("--out", help="append each point's numbers here (JSON lines); "
                        "points already in it are skipped")  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--report", nargs="+", metavar="FILE",
        help="print the points of earlier --out files, each model predicted anew on their "
        "recorded compute times (points from before they were kept: as recorded)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.report:
        print(HEADER)
        for line in itertools.chain(*(Path(f).read_text().splitlines() for f in args.report)):
            result = json.loads(line)
            print("\n".join(rows(predict(result) if "recorded_on_box" in result else result)))
        return
    if args.quick:
        args.schemes, args.losses, args.rates = ["classic_fr"], [0.0, 0.02], [1.25e7]
        args.workers, args.models, args.rounds = [4], ["cnn"], 8
    done: list[dict] = []
    if args.out and Path(args.out).is_file():
        done = [json.loads(line) for line in Path(args.out).read_text().splitlines()]
    print(HEADER, flush=True)
    grid = itertools.product(args.models, args.workers, args.rates, args.schemes, args.losses)
    for model, n, rate, scheme, loss in grid:
        rounds = args.rounds if model == "cnn" else args.resnet_rounds
        key = {"scheme": scheme, "loss": loss, "rate": rate, "n": n, "model": model}
        seen = [d for d in done if all(d[k] == v for k, v in key.items())]
        for result in seen[: args.repeats]:
            print("\n".join(rows(result)), flush=True)
        for _ in range(args.repeats - len(seen)):
            virtual_run = args.virtual_runs == "all" or loss == 0
            try:
                result = point(scheme, loss, rate, n, model, rounds, virtual_run)
            except RuntimeError as exc:  # e.g. Ray that cannot start on a starved machine
                why = f"{str(exc).strip().splitlines()[-1][:200]} (load {os.getloadavg()[0]:.1f})"
                cells = [scheme, str(n), model, f"{rate / 1e6:g}", f"{100 * loss:g}"]
                print(f"| {' | '.join(cells)} | failed: {why}; not recorded |", flush=True)
                continue
            print("\n".join(rows(result)), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
