"""SR-SGC, selective-repeat sequential gradient coding (Krishnan et al., ICLR 2023).

GC(s) per job with ``s = ⌈Bλ/(W−1+B)⌉`` and ``T = B``: a job missed by ``v > s``
workers in its round is redone by ``v − s`` of them ``B`` rounds later, instead of their
new job; the job decodes from ``n − s`` distinct results. The model, the shared decoder
and the departures from the papers' code: :mod:`gclab.coding.sgc`.
"""

from __future__ import annotations

from math import ceil
from typing import Any

import numpy as np

from gclab.coding import params
from gclab.coding.classic import ClassicCR
from gclab.coding.contract import Decoder, Encoder, Plan, Shape, StragglerModel, Task
from gclab.coding.linear import LinearEncoder
from gclab.coding.sgc import AdaptiveDecoder, AdaptiveScheme, BurstyModel, GroupWeights, check_bwl
from gclab.coding.sums import combine, compile_sums
from gclab.errors import DecodeError


def sr_sgc_stragglers(B: int, W: int, lam: int) -> int:
    """SR-SGC's GC parameter ``s = ⌈Bλ/(W−1+B)⌉``."""
    return ceil(B * lam / (W - 1 + B))


class SRSGCModel(BurstyModel):
    """:class:`BurstyModel` with the exemption rule of the papers' SR-SGC.

    Their ``SelectiveRepeatSGC.stragglers(window, exemption=True)`` leaves out a round in
    which every worker that did not straggle computed the round's own job (nobody
    repeated an older one) and at most ``s`` workers straggled: such a round costs the
    code nothing beyond what GC(s) absorbs in the round itself.
    """

    def exempt(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        plan = np.asarray(decoder.plans[round])
        return bool(np.all(erased | (plan == round))) and int(erased.sum()) <= self.scheme.s


class SRSGC(AdaptiveScheme):
    """Selective-repeat SGC: GC(s) per job, ``v − s`` repeats ``B`` rounds later."""

    name = "sr_sgc"

    def __init__(self, n: int, B: int = 1, W: int = 2, lam: int = 2) -> None:
        self._check_workers(n)
        B, W, lam = check_bwl(n, B, W, lam)
        valid_w = [B * i + 1 for i in range(1, 5)]
        params.require(
            (W - 1) % B == 0, f"B={B}, W={W}", "B | (W-1)", f"W-1={W - 1}",
            f"W for B={B}", valid_w,
        )  # fmt: skip
        self.B, self.W, self.lam = B, W, lam
        self.n, self.s, self.T = n, sr_sgc_stragglers(B, W, lam), B
        self.gc = ClassicCR(n, self.s)
        self.parts, self.placement = self.gc.parts, self.gc.placement

    @property
    def load(self) -> float:
        return (self.s + 1) / self.n

    @classmethod
    def shape(cls, n: int, B: int = 1, W: int = 2, lam: int = 2) -> Shape:
        """Without building the code: GC(s) per job, ``T = B``."""
        s = sr_sgc_stragglers(B, W, lam)
        return Shape((s + 1) / n, B, 1.0, f"{cls.name}(n={n}, B={B}, W={W}, lam={lam}, s={s})")

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """The SGC paper's SR-SGC grid: ``B <= 4``, ``W ∈ {B+1, 2B+1, …} <= 5``, every ``λ``.

        With ``recovery=decodable`` a run depends on ``(B, s)`` only (``s = ⌈Bλ/(W−1+B)⌉``;
        ``W`` and ``λ`` enter just the straggler model), so one setting per ``(B, s)`` is
        kept; with ``wait_all`` the model decides rounds and every setting counts.
        """
        seen, out = set(), []
        for B in range(1, 5):
            for W in range(B + 1, 6, B):
                for lam in range(1, n + 1):
                    s = sr_sgc_stragglers(B, W, lam)
                    key = (B, s) if recovery == "decodable" else (B, W, lam)
                    if key not in seen and s < n:
                        seen.add(key)
                        out.append({"B": B, "W": W, "lam": lam})
        return out

    def encoder(self, worker: int) -> Encoder:
        return LinearEncoder(self.gc, worker)  # one job per round: a classic packet

    def decoder(self, grad_size: int | None = None) -> Decoder:
        return SRSGCDecoder(self, grad_size)

    def straggler_model(self) -> StragglerModel:
        return SRSGCModel(self)

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, B={self.B}, W={self.W}, lam={self.lam}, s={self.s})"


class SRSGCDecoder(AdaptiveDecoder):
    """Plan of round ``r``: each worker's job (``r``, or ``r − B`` for the repeaters)."""

    STATE = (*AdaptiveDecoder.STATE, "results")

    def __init__(self, scheme: SRSGC, grad_size: int | None) -> None:
        super().__init__(scheme, grad_size)
        self.scheme: SRSGC = scheme
        self.results: dict[int, dict[int, int]] = {}  # job -> worker -> round of its result
        self.weights = GroupWeights(scheme.gc)
        if not self.symbolic:  # the decode's kernel is loaded now, not on a clock
            compile_sums(self.weights(tuple(range(scheme.n)))[1])

    def freeze(self, round: int) -> tuple[int, ...]:
        scheme = self.scheme
        jobs = [round] * scheme.n
        job = round - scheme.B
        if self.undecoded(job):
            computed = self.plans[job]
            have = self.results.get(job, {})
            idle = [w for w in range(scheme.n) if computed[w] != job]  # never computed it
            lost = [w for w in range(scheme.n) if computed[w] == job and w not in have]
            missing = len(idle) + len(lost)
            for w in (idle + lost)[: max(0, missing - scheme.s)]:
                jobs[w] = job
        return tuple(jobs)

    def record(self, round: int, workers: np.ndarray) -> None:
        plan = self.plans[round]
        for worker in workers.tolist():
            job = plan[worker]
            if self.undecoded(job):
                self.results.setdefault(job, {}).setdefault(worker, round)

    def tasks(self, round: int, plan: tuple) -> Plan:
        placement = self.scheme.placement
        return tuple(tuple(Task(plan[w], j) for j in placement[w]) for w in range(len(plan)))

    def decodable(self) -> list[int]:
        need = self.scheme.n - self.scheme.s
        return sorted(
            j for j, got in self.results.items() if len(got) >= need and j not in self.decoded
        )

    def decode(self, job: int) -> np.ndarray | None:
        if job not in self.decodable():
            raise DecodeError(f"job {job} is not decodable from the packets received so far.")
        got = self.results.pop(job)
        result = None
        if not self.symbolic:  # decodable() is exact: the simulator needs no weights
            used, weights = self.weights(tuple(got))
            packets = [self.packets[got[w]][w] for w in used]
            result = combine(packets, weights, self.grad_size, self.outputs)
        self.finish(job)
        return result

    def serves(self, round: int, jobs: int) -> bool:
        return any(job < jobs and self.undecoded(job) for job in set(self.planned(round)))

    def wanted(self, job: int) -> list[tuple[int, int]]:
        """Undelivered job-``job`` packets: its own round, then the repeats ``B`` later
        (of the rounds that have begun)."""
        if not self.undecoded(job):
            return []
        have = self.results.get(job, {})
        out = []
        for r in (job, job + self.scheme.B):
            if r > self.frozen:
                break
            out += [
                (r, w)
                for w in range(self.scheme.n)
                if self.plans[r][w] == job and w not in have and w not in self.packets.get(r, {})
            ]
        return out
