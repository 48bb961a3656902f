"""Drive sequential schemes (T > 0) through the contract with real payloads."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gclab.coding.contract import Scheme
from gclab.network import Finished, NetworkConfig, RoundProtocol


def job_partials(scheme: Scheme, jobs: int, length: int, seed: int) -> np.ndarray:
    """``[jobs, parts, length]`` float64 partial gradients; ``truth[t] = sum over parts``."""
    return np.random.default_rng(seed).standard_normal((jobs, len(scheme.parts), length))


@dataclass
class StreamRun:
    """Outcome of :func:`run_stream`: decode round of every job and what recovery did."""

    decoded_at: dict[int, int] = field(default_factory=dict)
    recovered: dict[int, int] = field(default_factory=dict)  # job -> packets recovered
    errors: list[float] = field(default_factory=list)


def run_stream(
    scheme: Scheme, erased: np.ndarray, grads: np.ndarray, wide: bool = False
) -> StreamRun:
    """Run ``erased.shape[0]`` rounds: encode every worker's plan, deliver the packets not
    erased, decode every decodable job, and recover the job due at the end of each round
    from ``decoder.wanted`` (in order, one packet at a time: retransmission always succeeds).

    Packets have the dtype of ``grads``; with ``wide`` they are delivered as float64 (a
    decoder then keeps float64 state). Drain rounds (jobs beyond ``grads``) compute zero
    partials, as the runtime does.
    """
    jobs, length = grads.shape[0], grads.shape[2]
    encoders = [scheme.encoder(w) for w in range(scheme.n)]
    decoder = scheme.decoder(length)
    sent: dict[tuple[int, int], np.ndarray] = {}
    run = StreamRun()
    zero = np.zeros(length, dtype=grads.dtype)

    def deliver(r: int, w: int) -> None:
        decoder.receive(r, w, sent[r, w].astype(np.float64) if wide else sent[r, w])

    def take(job: int, r: int) -> None:
        got = decoder.decode(job)
        truth = grads[job].sum(axis=0, dtype=np.float64)
        run.errors.append(float(np.linalg.norm(got - truth) / np.linalg.norm(truth)))
        run.decoded_at[job] = r

    for r in range(erased.shape[0]):
        decoder.begin_round(r)
        plan = decoder.plan(r)
        for w in range(scheme.n):
            mine = {t: (grads[t.job, t.part] if t.job < jobs else zero) for t in plan[w]}
            sent[r, w] = encoders[w].encode(r, mine)
        for w in np.flatnonzero(~erased[r]).tolist():
            deliver(r, w)
        for job in decoder.decodable():
            if job < jobs:
                take(job, r)
        due = r - scheme.T
        if 0 <= due < jobs and due not in run.decoded_at:
            count = 0
            for pr, w in decoder.wanted(due):
                deliver(pr, w)
                count += 1
                if due in decoder.decodable():
                    break
            run.recovered[due] = count
            for job in decoder.decodable():
                if job < jobs:
                    take(job, r)
    return run


def bursty_mask(rounds: int, n: int, rate: float, burst: float, seed: int) -> np.ndarray:
    """Gilbert–Elliott-like losses: per worker a two-state chain, mean burst ``burst``."""
    rng = np.random.default_rng(seed)
    leave_bad = 1.0 / burst
    enter_bad = rate * leave_bad / (1.0 - rate)
    state = rng.random(n) < rate
    out = np.empty((rounds, n), dtype=bool)
    for r in range(rounds):
        out[r] = state
        u = rng.random(n)
        state = np.where(state, u >= leave_bad, u < enter_bad)
    return out


def real_run(scheme: Scheme, delay, network: NetworkConfig, jobs: int, seed: int):
    """The runtime's loop without Ray: real float64 packets through the same protocol.

    Returns ``(durations, decoded round per job, worst relative error)``.
    """
    length = 4
    grads = job_partials(scheme, jobs, length, seed)
    protocol = RoundProtocol(network, delay, scheme.n, seed)
    decoder = scheme.decoder(length)
    encoders = [scheme.encoder(w) for w in range(scheme.n)]
    sent: dict[tuple[int, int], np.ndarray] = {}
    zero = np.zeros(length)
    durations, decoded_at, worst = [], {}, 0.0
    for r in range(jobs + scheme.T):
        decoder.begin_round(r)
        if not protocol.runs(r, jobs, decoder):  # as the runtime: no round after the last decode
            continue
        plan = decoder.plan(r)
        for w in range(scheme.n):
            mine = {t: (grads[t.job, t.part] if t.job < jobs else zero) for t in plan[w]}
            sent[r, w] = encoders[w].encode(r, mine)
        out = protocol.run_round(
            r, Finished(np.zeros(scheme.n)), decoder, lambda rr, w: sent[rr, w]
        )
        for job in out.decodable:
            got = decoder.decode(job)
            if job < jobs:
                truth = grads[job].sum(axis=0)
                worst = max(worst, float(np.linalg.norm(got - truth) / np.linalg.norm(truth)))
                decoded_at[job] = r
        durations.append(out.duration)
    return np.array(durations), decoded_at, worst


def symbolic_decode_rounds(scheme: Scheme, delay, network: NetworkConfig, jobs: int, seed: int):
    protocol = RoundProtocol(network, delay, scheme.n, seed)
    decoder = scheme.decoder()
    decoded_at = {}
    for r in range(jobs + scheme.T):
        decoder.begin_round(r)
        if not protocol.runs(r, jobs, decoder):
            continue
        out = protocol.run_round(r, Finished(np.zeros(scheme.n)), decoder, lambda rr, w: None)
        for job in out.decodable:
            decoder.decode(job)
            if job < jobs:
                decoded_at[job] = r
    return decoded_at
