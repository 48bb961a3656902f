"""Worst relative decode error with float32 payloads, ours vs Tandon's random H (same run).

For each (n, s): contiguous, spread and random straggler sets (a different seed from the
one the stride search uses, so the numbers are out of sample); partial gradients are
float32 N(0, 1), encoded by each worker's encoder, decoded by the scheme's decoder, and
compared with the float64 sum of the same float32 partials. Prints a Markdown table.

    python bench/decode_accuracy.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gclab.coding.base import LinearScheme, Task, combine
from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.evaluation import straggler_patterns
from gclab.errors import ConfigError, DecodeError


def worst_error(scheme: LinearScheme, length: int, randoms: int) -> tuple[float, int]:
    """(worst relative error over the straggler sets, sets the residual check rejected).

    A rejected set is still measured, decoding with the rejected weights, so the table
    shows how far off the gradient would have been.
    """
    n = scheme.n
    grads = np.random.default_rng(7).standard_normal((n, length)).astype(np.float32)
    truth = grads.astype(np.float64).sum(axis=0)
    packets = [
        scheme.encoder(w).encode(0, {Task(0, j): grads[j] for j in scheme.placement[w]})
        for w in range(n)
    ]
    worst, rejected = 0.0, 0
    for round, stragglers in enumerate(straggler_patterns(n, scheme.s, randoms, seed=2024)):
        decoder = scheme.decoder(length)
        survivors = tuple(w for w in range(n) if w not in stragglers)
        for w in survivors:
            decoder.receive(round, w, packets[w])
        try:
            got = decoder.decode(round)
        except DecodeError:
            rejected += 1
            weights = scheme.decoding_weights(survivors)
            got = combine([packets[w] for w in survivors], weights, length)
        worst = max(worst, float(np.linalg.norm(got - truth) / np.linalg.norm(truth)))
    return worst, rejected


def cell(make, n: int, s: int, length: int, randoms: int) -> str:
    """The table entry: worst error, with ``(k rejected)`` when the residual check fired."""
    try:
        scheme = make(n, s)
    except ConfigError:
        return "—"
    worst, rejected = worst_error(scheme, length, randoms)
    return f"{worst:.1e}" + (f" ({rejected} rejected)" if rejected else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n <= 64, fewer sets (< 1 min)")
    args = parser.parse_args()
    sizes = (16, 64) if args.quick else (16, 64, 256)
    randoms, length = (8, 512) if args.quick else (24, 2048)
    columns = {
        "classic_cr (ours)": lambda n, s: ClassicCR(n, s),
        "cce_cr m=2 (ours)": lambda n, s: CCECR(n, s, 2),
        "Tandon random H, seed 0": lambda n, s: ClassicCR(n, s, "tandon", seed=0),
        "Tandon random H, seed 1": lambda n, s: ClassicCR(n, s, "tandon", seed=1),
        "classic_fr": lambda n, s: ClassicFR(n, s),
    }
    start = time.perf_counter()
    print(f"float32 payloads, l={length}, worst of contiguous/spread/{randoms} random sets\n")
    print("| n | s | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for n in sizes:
        for s in (1, 3, 7, 15):
            row = [cell(make, n, s, length, randoms) for make in columns.values()]
            print(f"| {n} | {s} | " + " | ".join(row) + " |", flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s; rejected = sets whose weights failed the")
    print("residual check, so the decoder raised DecodeError; the error shown is what")
    print("decoding with those weights anyway would have given)")


if __name__ == "__main__":
    main()
