"""Exact answers the simulation is checked against.

* the published one-minute-step model as a Markov chain on the queue depth
  (exact expected overflow over a finite run, bursts included);
* M/M/c/K loss over a finite run starting empty: the forward (Kolmogorov)
  equations of the birth-death chain, solved minute by minute with a matrix
  exponential, with bursts as a per-minute random rate;
* the steady-state M/M/1/K and M/M/c/K blocking probabilities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm

from simulation.scenario import Scenario


@dataclass(frozen=True)
class Loss:
    """Expected totals over one run, and the expected depth at each minute boundary."""

    expected_arrived: float
    expected_dropped: float
    overflow_pct: float  # what the simulation's mean per-run overflow % estimates
    depth_series: list[float]


def article_fluid_dropped(production: int, review: int, capacity: int, duration: int) -> int:
    """Drops of the burst-free article model, in closed form.

    The depth after review grows by ``production - review`` a minute until an
    arrival batch no longer fits; from then on every minute drops exactly the
    surplus. Summing gives ``(P - R)·T + R - capacity`` once the queue has
    filled within the run (valid for ``review < production <= capacity``).
    """
    if production <= review:
        return 0
    return max(0, (production - review) * duration + review - capacity)


def article_loss(sc: Scenario) -> Loss:
    """Exact expectations of the article model with backpressure off.

    The state is (depth after review, bursts so far). Carrying the burst count
    lets the expected *ratio* dropped/arrived be computed exactly, which is what
    averaging per-run overflow over seeds estimates.
    """
    prod, rev = sc.production_per_min, sc.review_per_min
    burst_prod = prod * sc.burst_mult
    if not all(float(x).is_integer() for x in (prod, rev, burst_prod)):
        raise ValueError("production_per_min: the exact article chain needs whole numbers per minute")
    prod, rev, burst_prod = int(prod), int(rev), int(burst_prod)
    cap, horizon, p = sc.capacity, sc.duration_min, sc.burst_prob
    depths = np.arange(cap + 1)

    def step(n: int) -> tuple[np.ndarray, np.ndarray]:
        admitted = np.minimum(n, cap - depths)
        after = depths + admitted
        return after - np.minimum(rev, after), n - admitted

    next_normal, drop_normal = step(prod)
    next_burst, drop_burst = step(burst_prod)
    # prob[d, b] and dropped-mass[d, b] = E[dropped so far; state (d, b)].
    prob = np.zeros((cap + 1, horizon + 1))
    mass = np.zeros_like(prob)
    prob[0, 0] = 1.0
    depth_series = [0.0]
    for _ in range(horizon):
        new_prob = np.zeros_like(prob)
        new_mass = np.zeros_like(prob)
        for d in range(cap + 1):
            row_p, row_m = prob[d], mass[d]
            if not row_p.any():
                continue
            n_to = next_normal[d]
            new_prob[n_to] += (1 - p) * row_p
            new_mass[n_to] += (1 - p) * (row_m + drop_normal[d] * row_p)
            b_to = next_burst[d]
            new_prob[b_to, 1:] += p * row_p[:-1]
            new_mass[b_to, 1:] += p * (row_m[:-1] + drop_burst[d] * row_p[:-1])
        prob, mass = new_prob, new_mass
        depth_series.append(float(depths @ prob.sum(axis=1)))
    bursts = np.arange(horizon + 1)
    arrived_by_bursts = prod * horizon + (burst_prod - prod) * bursts
    expected_arrived = float(prob.sum(axis=0) @ arrived_by_bursts)
    expected_dropped = float(mass.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(arrived_by_bursts > 0, mass.sum(axis=0) / arrived_by_bursts, 0.0)
    return Loss(expected_arrived, expected_dropped, 100.0 * float(ratio.sum()), depth_series)


def mmck_generator(lam: float, mu: float, servers: int, capacity: int) -> np.ndarray:
    """Generator matrix of the M/M/c/K birth-death chain on 0..K in system."""
    n = capacity + 1
    q = np.zeros((n, n))
    for k in range(n):
        if k < capacity:
            q[k, k + 1] = lam
        if k > 0:
            q[k, k - 1] = min(k, servers) * mu
        q[k, k] = -q[k].sum()
    return q


def _minute_maps(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e^Q, integral of e^{Qs} over one minute), both from one exponential of the
    block matrix [[Q, I], [0, 0]] (Van Loan), which avoids inverting a singular Q."""
    n = q.shape[0]
    block = np.zeros((2 * n, 2 * n))
    block[:n, :n] = q
    block[:n, n:] = np.eye(n)
    e = expm(block)
    return e[:n, :n], e[:n, n:]


def mmck_transient_loss(sc: Scenario) -> Loss:
    """Exact expected loss of the ``poisson`` model (backpressure off) over its run.

    Each minute is a burst minute independently of the queue, so the state
    distribution at the next minute boundary is the burst-weighted mix of the
    two one-minute solutions of the forward equations, and expected blocked
    arrivals are the arrival rate times the time spent full (PASTA).
    """
    lam = sc.production_per_min
    mu = sc.review_per_min / sc.reviewers
    cap, p = sc.capacity, sc.burst_prob
    rates = ((1 - p, lam), (p, lam * sc.burst_mult))
    maps = [(w, rate, *_minute_maps(mmck_generator(rate, mu, sc.reviewers, cap))) for w, rate in rates]
    dist = np.zeros(cap + 1)
    dist[0] = 1.0
    states = np.arange(cap + 1)
    blocked = 0.0
    series = [0.0]
    for _ in range(sc.duration_min):
        nxt = np.zeros_like(dist)
        for weight, rate, step, integral in maps:
            if weight == 0:
                continue
            nxt += weight * (dist @ step)
            blocked += weight * rate * float(dist @ integral[:, cap])
        dist = nxt
        series.append(float(states @ dist))
    arrived = sc.duration_min * ((1 - p) * lam + p * lam * sc.burst_mult)
    pct = 100.0 * blocked / arrived if arrived else 0.0
    return Loss(arrived, blocked, pct, series)


def mm1k_blocking(rho: float, capacity: int) -> float:
    """Steady-state probability that an arrival finds an M/M/1/K queue full."""
    if math.isclose(rho, 1.0):
        return 1.0 / (capacity + 1)
    return (1 - rho) * rho**capacity / (1 - rho ** (capacity + 1))


def mmck_blocking(lam: float, mu: float, servers: int, capacity: int) -> float:
    """Steady-state blocking of M/M/c/K from the birth-death balance equations."""
    if lam <= 0:
        return 0.0
    # Work in logs: rho**K overflows floats for long queues under heavy load.
    k = np.arange(1, capacity + 1)
    log_w = np.concatenate(([0.0], np.cumsum(math.log(lam) - np.log(np.minimum(k, servers) * mu))))
    weights = np.exp(log_w - log_w.max())
    return float(weights[-1] / math.fsum(weights))


def stable_production_rate(sc: Scenario, target_overflow_pct: float) -> float:
    """The largest production rate, never above the review rate, whose
    steady-state loss (M/M/c/K blocking with the scenario's reviewers and
    capacity) stays within the target: what holds however long the queue runs.

    Unlike a simulated horizon, this does not start from an empty queue, so a
    rate above review (production/review > 1) is never stable, however large
    the capacity.
    """
    review = sc.review_per_min
    if review <= 0:
        return 0.0
    mu = review / sc.reviewers
    target = target_overflow_pct / 100
    if mmck_blocking(review, mu, sc.reviewers, sc.capacity) <= target:
        return review
    lo, hi = 0.0, review
    for _ in range(60):  # blocking grows with the rate: bisect to float precision
        mid = (lo + hi) / 2
        if mmck_blocking(mid, mu, sc.reviewers, sc.capacity) <= target:
            lo = mid
        else:
            hi = mid
    return lo
