"""Decode speed: every scheme's decode of a round against one in-place float32 pass over
the vectors that decode reads, on one thread.

For each model's gradient length (``cnn``: 356,810 floats, ``resnet18``: 11,173,962),
n = 4 and n = 16, and each scheme with its config defaults, a decoder is fed random
float32 packets round after round, without loss and with Bernoulli(0.1) losses (a
seeded pattern of 6 rounds, repeated, so that the patterns recur as in a long run). A
job still not decodable at its deadline gets the packets ``wanted`` names (the
protocol's recovery). Per round, ``decodable()`` and the decode of every decodable job
are timed together, as the driver's ``decode_ms`` does.

* **steady state**: the median over rounds that solved nothing new (every decoding
  weight came from a cache);
* **first time**: the median over rounds that solved a new erasure pattern (weights,
  residual check), reported apart;
* **ratio**: the median over those rounds of decode / baseline of the same round;
* **baseline**: right after each timed round, one in-place float32 pass over the vectors
  the round's decodes read (recorded from ``combine_sums`` and ``weighted_sum``):
  ``acc = v0 + v1``, then
  ``acc += v`` for each further vector, numpy ufuncs with ``out=``, no allocation. A
  float64 vector a pipelined decode reads (a decoded job still in its window) counts as
  the two float32 vectors of its bytes.
* **result write**: filling the round's results once, in their dtypes, a floor for any
  decode: a CCE code's result (m > 1) is m times longer than a packet, so it alone
  costs about a pass over the m-times-shorter packets. A one-shot decode of float32
  packets writes a float32 result (accumulated in float64, rounded once); a pipelined
  decode keeps float64 values it adds to later.

The previous round's results are held until this round's decode ends, as the driver
holds its ``gradients``: result arrays are reused only once dropped
(:class:`gclab.coding.numerics.Outputs`).

Then the first-time coefficient solve alone for new straggler sets at n = 256, s = 15
(pipelined: a new erasure pattern over the T+1 rounds of a window).

BLAS and OpenMP are pinned to one thread before numpy loads (the driver's default
``cluster.server_threads=1``). Both sides are timed in this thread's CPU time (user and
system: page faults count): on an idle machine that is the elapsed time, and on a
shared one it leaves out the time other jobs hold the core (``--wall`` times elapsed).

    python bench/decode_speed.py [--quick]     # --quick: cnn only, n = 4 and 16
    python bench/decode_speed.py --models resnet18 --workers 4 --no-solves
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads its BLAS

import argparse  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from common import machine  # noqa: E402

from gclab.coding import numerics, stream  # noqa: E402
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
SCHEMES: list[Callable[[int], Scheme]] = [
    Uncoded, IgnoreStragglers, ClassicFR, ClassicCR, CCEFR, CCECR,
    PipelinedFR, PipelinedCR, SRSGC, MSGC,
]  # fmt: skip

PERIOD, LOSS = 6, 0.1  # loss patterns: Bernoulli(LOSS), PERIOD rounds, repeated

#: The clock of the decode table: this thread's CPU time (``--wall``: elapsed time).
clock = time.thread_time


class Reads:
    """Records the vectors every decode reads: wraps ``combine_sums`` and ``weighted_sum``,
    one of which every decoder calls (through ``combine`` or directly)."""

    def __init__(self) -> None:
        self.vectors: list[np.ndarray] = []
        self.sums, self.weighted = numerics.combine_sums, numerics.weighted_sum

    def combine_sums(self, sums: Sequence[numerics.Sum], *args: Any, **kwargs: Any) -> list:
        for vectors, _ in sums:
            self.vectors.extend(vectors)
        return self.sums(sums, *args, **kwargs)

    def weighted_sum(self, vectors: Sequence[np.ndarray], *args: Any) -> np.ndarray:
        self.vectors.extend(vectors)
        return self.weighted(vectors, *args)

    def install(self) -> None:
        for module in (numerics, stream):
            module.combine_sums = self.combine_sums
        numerics.weighted_sum = self.weighted_sum


#: The recorder of every decode's reads.
READS = Reads()


def inplace_pass(vectors: list[np.ndarray], stand_ins: list[np.ndarray], acc: np.ndarray) -> float:
    """Seconds of one in-place float32 pass over ``vectors``.

    A float64 vector counts as two float32 vectors of its length, read from
    ``stand_ins`` (its own bytes read as float32 hold NaNs and subnormals, which are slow).
    """
    spare = itertools.cycle(stand_ins)  # enough for every scheme here; cycled to be safe
    flat = []
    for v in vectors:
        flat += [v] if v.dtype == np.float32 else [next(spare)[: v.size] for _ in range(2)]
    size = min(v.size for v in flat)
    start = clock()
    if len(flat) == 1:
        np.copyto(acc[:size], flat[0][:size])
    else:
        np.add(flat[0][:size], flat[1][:size], out=acc[:size])
        for v in flat[2:]:
            np.add(acc[:size], v[:size], out=acc[:size])
    return clock() - start


def result_write(results: list[np.ndarray], sink: np.ndarray) -> float:
    """Seconds to write the round's results once, in their dtypes (a floor for any decode)."""
    start = clock()
    for result in results:
        sink.view(result.dtype)[: result.size].fill(0.0)
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


def run(
    scheme: Scheme,
    length: int,
    pool: list[np.ndarray],
    lossy: bool,
    acc: np.ndarray,
    sink: np.ndarray,
) -> dict:
    """Feed rounds to a fresh decoder; per-round decode and baseline seconds, by kind."""
    size = packet_size(scheme, length)
    packets = [p[:size] for p in pool]
    decoder = scheme.decoder(length)
    reads = READS
    pattern = losses(scheme.n, lossy)
    stand_ins = [half for p in pool for half in (p[:length], p[length:])]
    steady, first, plain, write, read, results = [], [], [], [], [], []
    rounds = scheme.T + PERIOD * (2 if length > 1_000_000 else 8)  # small ones are cheap
    for r in range(rounds + scheme.T):  # the last T rounds drain the pipeline
        decoder.begin_round(r)
        decoder.plan(r)
        lost = pattern[r % PERIOD] if r < rounds else set(range(scheme.n))
        workers = [w for w in range(scheme.n) if w not in lost]
        decoder.receive_many(r, workers, [packets[w] for w in workers])
        before, reads.vectors, held = solves(decoder), [], results
        start = clock()
        ready = decoder.decodable()
        results = [decoder.decode(job) for job in ready]
        due = r - scheme.T
        if due >= 0 and due not in ready:
            for rr, w in decoder.wanted(due):  # recovery: the packets it needs
                decoder.receive(rr, w, packets[w])
            results += [decoder.decode(job) for job in decoder.decodable()]
        seconds = clock() - start
        del held  # the driver holds a round's gradients until the next round's decode
        if not reads.vectors:
            continue
        if solves(decoder) > before:
            first.append(seconds)
        else:
            steady.append(seconds)
            plain.append(inplace_pass(reads.vectors, stand_ins, acc))
            write.append(result_write(results, sink))
            read.append(sum(v.nbytes for v in reads.vectors) / (4 * length))
    return {
        "steady": float(np.median(steady)) if steady else float("nan"),
        # per round, against the pass right after it: other load on the machine cancels
        "ratio": float(np.median(np.divide(steady, plain))) if steady else float("nan"),
        "plain": float(np.median(plain)) if plain else float("nan"),
        "write": float(np.median(write)) if write else float("nan"),
        "first": float(np.median(first)) if first else float("nan"),
        "vectors": float(np.median(read)) if read else float("nan"),
    }


def table(models: list[str], workers: list[int]) -> None:
    print(
        "| scheme | model | n | loss | float32 vectors read | steady decode (ms) "
        "| in-place pass (ms) | ratio | result write (ms) | first-time round (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for model in models:
        length = MODELS[model]
        for n in workers:
            longest = 2 * length  # M-SGC's packets: W − 1 + B = 2 slots
            pool = [rng.standard_normal(longest, dtype=np.float32) for _ in range(n)]
            acc = np.empty(length, dtype=np.float32)
            sink = np.zeros(length)
            for make in SCHEMES:
                scheme = make(n)
                for lossy in (False, True):
                    got = run(scheme, length, pool, lossy, acc, sink)
                    ms = {k: f"{got[k] * 1e3:.1f}" for k in ("steady", "plain", "write", "first")}
                    print(
                        f"| {scheme.describe()} | {model} | {n} | {'p=0.1' if lossy else 'none'} "
                        f"| {got['vectors']:.1f} | {ms['steady']} | {ms['plain']} "
                        f"| {got['ratio']:.2f} | {ms['write']} | {ms['first']} |",
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
    parser.add_argument("--quick", action="store_true", help="the small CNN only")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--workers", nargs="+", type=int, default=[4, 16])
    parser.add_argument("--no-solves", action="store_true", help="skip the n = 256 solve table")
    parser.add_argument("--wall", action="store_true", help="elapsed time, not thread CPU time")
    args = parser.parse_args()
    global clock
    clock = time.perf_counter if args.wall else time.thread_time
    print(f"# {machine()}")
    print(f"# one thread; losses: none, or Bernoulli({LOSS}) over {PERIOD} rounds, repeated")
    print(f"# clock: {'elapsed time' if args.wall else 'thread CPU time'}\n")
    READS.install()
    table(["cnn"] if args.quick else args.models, args.workers)
    if not args.no_solves:
        solve_table()


if __name__ == "__main__":
    main()
