"""Decode speed: (coefficient lookup + combine) per scheme vs a plain sum of the same packets.

n=16, s=3, l=11.2M float32 (ResNet-18): each scheme's decoder is warmed on the straggler
set (so the weights are cached, as in training), then a fresh round's packets are
received and ``decode`` is timed; beside it ``torch.stack(...).sum(0)`` on as many
gradient-length vectors as the decode reads. Sequential schemes (T > 0) decode, as the
runtime does, the oldest decodable job after each round: pipelined ones job r (delay 0)
from 13 packets and T earlier decoded jobs, SR-SGC job r from its 13 GC packets, M-SGC
(no stragglers: permanent ones break its model) job r − T from its n(W−1) D1 chunks and
B·(n−λ) D2 slots. A pipelined decode also reads the float64 values of the T earlier
jobs of each block, bytes the plain sum of the packets does not read, so a second plain
sum reads the same bytes (each float64 value as two more float32 vectors). Then the
first-time coefficient solve
(weights + residual check) for new straggler sets at n=256, s=15 (pipelined: a new
erasure pattern over the T+1 rounds of a window). Best of 7 interleaved runs (2 with
``--quick``).

Both sides run on one thread by default: ``combine`` is single-threaded (splitting it
over Python threads was slower here: its per-chunk loop holds the GIL and numpy's BLAS
threads oversubscribe the cores) and the driver runs with ``cluster.server_threads=1``;
``--threads 2`` gives torch's plain sum two threads against the same one-thread decode.

    python bench/decode_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from gclab.coding.base import LinearScheme, Scheme
from gclab.coding.cce import CCECR, CCEFR
from gclab.coding.classic import ClassicCR, ClassicFR, IgnoreStragglers
from gclab.coding.pipelined import PipelinedCR, PipelinedFR
from gclab.coding.sgc import MSGC, SRSGC
from gclab.coding.uncoded import Uncoded
from gclab.errors import DecodeError


def vectors_read(scheme: Scheme, received: int) -> int:
    """Gradient-length vectors one decode reads (M-SGC: its D1 chunks and D2 slots)."""
    if isinstance(scheme, MSGC):
        return scheme.n * (scheme.W - 1) + scheme.groups * (scheme.n - scheme.lam)
    return received


def decode_time(scheme: Scheme, length: int, stragglers: set[int], repeats: int) -> tuple:
    """(decode s, plain sum of the packets s, plain sum of every byte decode reads s, earlier
    decoded values read): the last two differ from the packets for pipelined codes, whose
    decode of job t also reads the float64 values of jobs t−T..t−1 (per block)."""
    size = math.ceil(length * scheme.packet_fraction)
    rng = np.random.default_rng(0)
    received = {
        w: rng.standard_normal(size, dtype=np.float32)
        for w in range(scheme.n)
        if w not in stragglers
    }
    decoder = scheme.decoder(length)
    counter = iter(range(10**6))
    earlier = [0]

    def decode() -> float:
        round = next(counter)
        for w, packet in received.items():
            decoder.receive(round, w, packet)
        ready = decoder.decodable()
        if not ready:
            return decode()
        earlier[0] = sum(len(v) for v in getattr(decoder, "values", ()))
        start = time.perf_counter()
        decoder.decode(ready[0])
        return time.perf_counter() - start

    for _ in range(scheme.T + 1):  # solve and cache the weights; fill the T earlier values
        decode()
    plain = -(-length // getattr(scheme, "m", 1))
    vector = rng.standard_normal(plain, dtype=np.float32)
    packets = vectors_read(scheme, len(received))
    tensors = [torch.from_numpy(vector.copy()) for _ in range(packets + 2 * earlier[0])]

    def plain_sum(count: int) -> float:
        start = time.perf_counter()
        torch.stack(tensors[:count]).sum(0)
        return time.perf_counter() - start

    # interleaved, best of each: page faults of the large outputs (transparent huge pages
    # or not) swing single timings up to 2x, and interleaving exposes all three to the
    # same memory state
    runs = [(decode(), plain_sum(packets), plain_sum(len(tensors))) for _ in range(repeats)]
    return (*(min(column) for column in zip(*runs)), earlier[0])


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="l = 1.12M, 2 repeats")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads of the plain sum (default 1: decode runs on one thread, as the "
        "driver does with its default cluster.server_threads=1)",
    )  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    length, repeats = (1_120_000, 2) if args.quick else (11_200_000, 7)
    n, s = 16, 3
    stragglers = {1, 6, 11}  # one per FR group of 4, so every scheme decodes
    schemes = [
        Uncoded(n),
        IgnoreStragglers(n, s),
        ClassicFR(n, s),
        ClassicCR(n, s),
        ClassicCR(n, s, construction="real"),
        ClassicCR(n, s, construction="tandon"),
        CCECR(n, s, 2),
        CCECR(n, s, 2, construction="real"),
        CCEFR(n, s, 5),
        PipelinedCR(n, s, 2),
        PipelinedFR(n, s, 2),
        SRSGC(n, 1, 2, 6),  # s = 3
        MSGC(n, 1, 2, 3),
    ]
    print(f"n={n}, s={s}, l={length:,} float32, torch threads={torch.get_num_threads()}\n")
    print(
        "| scheme | packets (+ earlier values) | decode (ms) | plain sum of packets (ms) | ratio "
        "| plain sum of the same bytes (ms) | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for scheme in schemes:
        out = set() if isinstance(scheme, Uncoded | MSGC) else stragglers
        ours, plain, same, earlier = decode_time(scheme, length, out, repeats)
        read = f"{vectors_read(scheme, n - len(out))}" + (f" (+{earlier})" if earlier else "")
        times = f"{ours * 1e3:.0f} | {plain * 1e3:.0f} | {ours / plain:.2f}"
        print(f"| {scheme.describe()} | {read} | {times} | {same * 1e3:.0f} | {ours / same:.2f} |")
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


if __name__ == "__main__":
    main()
