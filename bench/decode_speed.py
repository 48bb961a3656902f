"""Decode speed: every scheme's decode of a round against one in-place float32 sum of the
packets that arrived in that round, side by side, on one thread.

What a user pays per round is ``decode_ms`` (``decodable()`` and the decode of every
decodable job, as the driver times it) against the packets the round delivered. Settings:
ResNet-18's gradient (11,173,962 floats) at n = 4, and the small CNN's (356,810) at n = 8
and 64, every scheme with its config defaults; the CNN at n = 256 with the SGC papers'
settings (GC s = 15, SR-SGC (2, 3, 23), M-SGC (1, 2, 27)) and uncoded. A decoder is fed
random float32 packets of the scheme's packet length round after round, without loss and
with Bernoulli(0.1) losses (a seeded pattern of 6 rounds, repeated, so that patterns
recur as in a long run); a job still not decodable at its deadline gets the packets
``wanted`` names (the protocol's recovery), which then arrive in that round too.

* **baseline**: right after each timed round, one in-place float32 sum of the packets
  that arrived in it (``acc = p0 + p1``, then ``acc += p`` for each further packet, numpy
  ufuncs with ``out=``, no allocation). M-SGC's packets are ``W − 1 + B`` gradients long,
  so its baseline reads that much more: it is what arrived;
* **steady**: the median over rounds that solved nothing new (every decoding weight came
  from a cache), and **ratio**: the median over those rounds of decode / baseline of
  the same round (other load on the machine cancels);
* **first time**: rounds that solved a new erasure pattern (weights and residual check;
  for SR-SGC and M-SGC a new set of results per job), reported apart with their ratio.
  At n = 256 on real delays nearly every round is one: stragglers differ each round.

The previous round's results are held until this round's decode ends, as the driver
holds its gradients (:class:`gclab.coding.numerics.Outputs` reuses an array only once
nobody refers to it). Then the first-time coefficient solve alone for new straggler sets
at n = 256, s = 15.

BLAS and OpenMP are pinned to one thread before numpy loads (the driver's default
``cluster.server_threads=1``). Both sides are timed in this thread's CPU time (user and
system: page faults count): on an idle machine that is the elapsed time, and on a
shared one it leaves out the time other jobs hold the core (``--wall`` times elapsed).

    python bench/decode_speed.py [--quick]     # --quick: n = 8 and 64 only (the CNN)
    python bench/decode_speed.py --settings resnet18:4 cnn:256 --no-solves
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads its BLAS

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
from common import machine  # noqa: E402

from gclab.coding.cce import CCECR, CCEFR  # noqa: E402
from gclab.coding.classic import ClassicCR, ClassicFR, IgnoreStragglers  # noqa: E402
from gclab.coding.contract import Decoder, Scheme  # noqa: E402
from gclab.coding.linear import LinearScheme  # noqa: E402
from gclab.coding.m_sgc import MSGC  # noqa: E402
from gclab.coding.pipelined import PipelinedCR, PipelinedFR  # noqa: E402
from gclab.coding.sr_sgc import SRSGC  # noqa: E402
from gclab.coding.uncoded import Uncoded  # noqa: E402
from gclab.errors import DecodeError  # noqa: E402

MODELS = {"cnn": 356_810, "resnet18": 11_173_962}  # parameters of gclab.ml.models

#: Every scheme of gclab/conf/scheme/ with its config defaults.
DEFAULTS: list[Callable[[int], Scheme]] = [
    Uncoded, IgnoreStragglers, ClassicFR, ClassicCR, CCEFR, CCECR,
    PipelinedFR, PipelinedCR, SRSGC, MSGC,
]  # fmt: skip

#: The SGC papers' settings at n = 256 (docs/sequential.md), and uncoded.
PAPERS: list[Callable[[int], Scheme]] = [
    Uncoded,
    lambda n: ClassicCR(n, 15),
    lambda n: ClassicFR(n, 15),
    lambda n: SRSGC(n, 2, 3, 23),
    lambda n: MSGC(n, 1, 2, 27),
]

#: ``model:n`` settings run by default, and their schemes.
SETTINGS = {"resnet18:4": DEFAULTS, "cnn:8": DEFAULTS, "cnn:64": DEFAULTS, "cnn:256": PAPERS}

PERIOD, LOSS = 6, 0.1  # loss patterns: Bernoulli(LOSS), PERIOD rounds, repeated

#: The clock of the decode table: this thread's CPU time (``--wall``: elapsed time).
clock = time.thread_time


def inplace_sum(packets: list[np.ndarray], acc: np.ndarray) -> float:
    """Seconds of one in-place float32 sum of ``packets`` into ``acc``."""
    size = packets[0].size
    out = acc[:size]
    start = clock()
    if len(packets) == 1:
        np.copyto(out, packets[0])
    else:
        np.add(packets[0], packets[1], out=out)
        for packet in packets[2:]:
            np.add(out, packet, out=out)
    return clock() - start


def solves(decoder: Decoder) -> int:
    """Erasure patterns solved so far: the sizes of the decoder's weight caches."""
    caches = (
        getattr(decoder, "_cache", ()),  # static codes
        getattr(decoder.scheme, "_solutions", ()),  # pipelined codes
        getattr(getattr(decoder, "weights", None), "cache", ()),  # SR-SGC, M-SGC
    )
    return sum(len(c) for c in caches)


def losses(n: int, lossy: bool) -> list[set[int]]:
    """The erased workers of each round of one period."""
    rng = np.random.default_rng(n)
    return [
        set(np.flatnonzero(rng.random(n) < LOSS).tolist()) if lossy else set()
        for _ in range(PERIOD)
    ]


def packet_size(scheme: Scheme, length: int) -> int:
    """The floats of a packet the scheme's encoder sends: ``⌈l·packet_fraction⌉``, and for
    a code on float pairs ``2·⌈l/2m⌉`` (whole pairs per stream, as ``as_streams`` pads)."""
    if getattr(scheme, "pairs", False):
        return 2 * -(-length // (2 * scheme.m))
    return int(np.ceil(length * scheme.packet_fraction))


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def run(scheme: Scheme, length: int, pool: list[np.ndarray], lossy: bool, acc: np.ndarray) -> dict:
    """Feed rounds to a fresh decoder; per-round decode and baseline seconds, by kind."""
    size = packet_size(scheme, length)
    packets = [p[:size] for p in pool]
    decoder = scheme.decoder(length)
    pattern = losses(scheme.n, lossy)
    kinds: dict[str, list[tuple[float, float]]] = {"steady": [], "first": []}
    arrived_counts, results = [], []
    rounds = scheme.T + PERIOD * (2 if length > 1_000_000 else 4)  # small ones are cheap
    for r in range(rounds + scheme.T):  # the last T rounds drain the pipeline
        decoder.begin_round(r)
        decoder.plan(r)
        lost = pattern[r % PERIOD] if r < rounds else set(range(scheme.n))
        workers = [w for w in range(scheme.n) if w not in lost]
        arrived = [packets[w] for w in workers]
        decoder.receive_many(r, workers, arrived)
        before, held = solves(decoder), results
        start = clock()
        ready = decoder.decodable()
        results = [decoder.decode(job) for job in ready]
        due = r - scheme.T
        if due >= 0 and due not in ready:
            for rr, w in decoder.wanted(due):  # recovery: the packets it needs
                decoder.receive(rr, w, packets[w])
                arrived.append(packets[w])
            results += [decoder.decode(job) for job in decoder.decodable()]
        seconds = clock() - start
        del held  # the driver holds a round's gradients until the next round's decode
        if not results or not arrived:
            continue
        kind = "first" if solves(decoder) > before else "steady"
        kinds[kind].append((seconds, inplace_sum(arrived, acc)))
        arrived_counts.append(len(arrived))
    out = {"arrived": median(arrived_counts)}
    for kind, pairs in kinds.items():
        decode, plain = [p[0] for p in pairs], [p[1] for p in pairs]
        out[kind] = median(decode)
        out[kind + " plain"] = median(plain)
        out[kind + " ratio"] = median([d / p for d, p in pairs])
        out[kind + " rounds"] = len(pairs)
    return out


def table(settings: list[str]) -> None:
    print(
        "| scheme | model | n | loss | packets arrived | steady decode (ms) "
        "| in-place sum of arrivals (ms) | ratio | first-time rounds | first-time decode (ms) "
        "| first-time ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for setting in settings:
        model, n = setting.split(":")
        length, n = MODELS[model], int(n)
        schemes = [make(n) for make in SETTINGS.get(setting, DEFAULTS)]
        longest = max(packet_size(scheme, length) for scheme in schemes)  # M-SGC's: 2 slots
        pool = [rng.standard_normal(longest, dtype=np.float32) for _ in range(n)]
        acc = np.empty(longest, dtype=np.float32)
        for scheme in schemes:
            for lossy in (False, True):
                got = run(scheme, length, pool, lossy, acc)
                ms = {k: f"{got[k] * 1e3:.1f}" for k in ("steady", "steady plain", "first")}
                print(
                    f"| {scheme.describe()} | {model} | {n} | {'p=0.1' if lossy else 'none'} "
                    f"| {got['arrived']:.0f} | {ms['steady']} | {ms['steady plain']} "
                    f"| {got['steady ratio']:.2f} | {got['first rounds']} | {ms['first']} "
                    f"| {got['first ratio']:.2f} |",
                    flush=True,
                )


def solve_time(scheme: Scheme, patterns: int) -> tuple[float, int]:
    """(mean seconds of a first-time weights + residual solve, residual-check failures).

    Static codes: ``checked_weights`` of a new survivor set. Pipelined codes: the first
    ``decodable()`` of a fresh decoder fed a new pattern of ``s`` losses in each of the
    ``T + 1`` rounds of a window (equations, job-space solve, residual check).
    """
    rng = np.random.default_rng(1)
    total, failed = 0.0, 0
    for _ in range(patterns):
        rounds = []
        for _ in range(scheme.T + 1):
            out = set(rng.choice(scheme.n, scheme.s, replace=False).tolist())
            rounds.append(tuple(w for w in rng.permutation(scheme.n).tolist() if w not in out))
        start = time.perf_counter()
        try:
            if isinstance(scheme, LinearScheme):
                scheme.checked_weights(rounds[0])
            else:
                decoder = scheme.decoder()
                for r, survivors in enumerate(rounds):
                    for w in survivors:
                        decoder.receive(r, w, None)
                decoder.decodable()
        except DecodeError:
            failed += 1
        total += time.perf_counter() - start
    return total / patterns, failed


def solve_table() -> None:
    print("\nFirst-time coefficient solve for a new straggler set, n=256 (mean of 20):\n")
    print("| scheme | construction (s) | solve (ms) | residual-check failures |")
    print("|---|---|---|---|")
    for make in (
        lambda: ClassicFR(256, 15),
        lambda: ClassicCR(256, 15),
        lambda: ClassicCR(256, 15, construction="real"),
        lambda: CCECR(256, 15, 2),
        lambda: CCEFR(256, 14, 2),
        lambda: ClassicCR(256, 15, construction="tandon"),
        lambda: PipelinedCR(256, 15, 2),
        lambda: PipelinedFR(256, 15, 2),
    ):
        start = time.perf_counter()
        scheme = make()
        if isinstance(scheme, LinearScheme):  # evaluation codes build their numbers lazily
            _ = scheme.encoding
        built = time.perf_counter() - start
        solve, failed = solve_time(scheme, 20)
        print(f"| {scheme.describe()} | {built:.2f} | {solve * 1e3:.2f} | {failed}/20 |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cnn:8 and cnn:64 only")
    parser.add_argument(
        "--settings", nargs="+", default=list(SETTINGS), help="model:n pairs (default: %(default)s)"
    )
    parser.add_argument("--no-solves", action="store_true", help="skip the n = 256 solve table")
    parser.add_argument("--wall", action="store_true", help="elapsed time, not thread CPU time")
    args = parser.parse_args()
    global clock
    clock = time.perf_counter if args.wall else time.thread_time
    print(f"# {machine()}")
    print(f"# one thread; losses: none, or Bernoulli({LOSS}) over {PERIOD} rounds, repeated")
    print(f"# clock: {'elapsed time' if args.wall else 'thread CPU time'}\n")
    table(["cnn:8", "cnn:64"] if args.quick else args.settings)
    if not args.no_solves:
        solve_table()


if __name__ == "__main__":
    main()
