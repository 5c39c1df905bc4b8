"""Speed of the capacity model, measured side by side in one run.

    .venv/bin/python bench/bench_simulation.py [--replications 1000]

Prints the time of one 2-hour run of each model, the plain-loop twin and the
exact analytic solves, then replications per second serial and parallel and
simulated events per second, and the ratios between them. Absolute times
depend on the machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from benchlib import median_seconds

from simulation import PRESETS, run_replications, simulate
from simulation.analytic import article_loss, mmck_transient_loss
from simulation.plain import run_article_plain


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    article = PRESETS["B"]
    poisson = dataclasses.replace(article, model="poisson")
    backpressure = dataclasses.replace(article, model="poisson", backpressure=True)
    seeds = iter(range(10**9))

    one = {
        "SimPy article B": median_seconds(lambda: simulate(article, next(seeds)), args.repeat),
        "plain-loop article B": median_seconds(lambda: run_article_plain(article, next(seeds)), args.repeat),
        "SimPy poisson B": median_seconds(lambda: simulate(poisson, next(seeds)), args.repeat),
        "SimPy poisson B, backpressure": median_seconds(lambda: simulate(backpressure, next(seeds)), args.repeat),
        "exact article chain B": median_seconds(lambda: article_loss(article), 5),
        "exact M/M/1/K transient B": median_seconds(lambda: mmck_transient_loss(poisson), 5),
    }
    print("one 2-hour run (median of repeats)")
    for name, secs in one.items():
        print(f"  {name:32s} {secs * 1000:8.2f} ms")
    base = one["SimPy article B"]
    print("ratios")
    print(f"  SimPy / plain loop (article B)          {base / one['plain-loop article B']:6.1f} x")
    print(f"  exact chain / one SimPy article run     {one['exact article chain B'] / base:6.1f} x")
    print(
        f"  exact transient / one SimPy poisson run {one['exact M/M/1/K transient B'] / one['SimPy poisson B']:6.1f} x"
    )

    n = args.replications
    cores = os.cpu_count() or 1
    timings = {}
    for label, workers in (("serial", 1), (f"{cores} workers", cores)):
        start = time.perf_counter()
        summary = run_replications(article, n, seed=1, workers=workers)
        timings[label] = time.perf_counter() - start
    start = time.perf_counter()
    psummary = run_replications(poisson, n, seed=1, workers=cores)
    p_secs = time.perf_counter() - start
    events = sum(r.events for r in psummary.runs)
    print(f"{n} replications of preset B")
    for label, secs in timings.items():
        print(f"  article, {label:12s} {secs:6.2f} s  {n / secs:8.0f} replications/s")
    print(f"  poisson, {cores} workers    {p_secs:6.2f} s  {n / p_secs:8.0f} replications/s")
    print(f"  poisson events simulated  {events / p_secs:10.0f} events/s ({events / n:.0f} per run)")
    print(f"  parallel speed-up          {timings['serial'] / timings[f'{cores} workers']:6.2f} x on {cores} cores")
    print(f"  overflow % mean (article) {summary.mean('overflow_pct'):6.2f}")


if __name__ == "__main__":
    main()
