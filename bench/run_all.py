"""Every bench, one after another, within 15 minutes on 2 cores.

    .venv/bin/python bench/run_all.py            # the figures in bench/README.md
    .venv/bin/python bench/run_all.py --quick    # a smoke run, about a minute

Each bench runs as its own process (so one's Django set-up or crash cannot
affect the next) with a time limit, and its figures are printed as they come.
PostgreSQL must be reachable (BENCH_PG_URL, default the local trust-auth server);
each bench creates and drops its own scratch databases.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def plan(args: argparse.Namespace) -> list[tuple[str, list[str], int]]:
    """(name, argv, time limit in seconds) for each bench at the chosen sizes."""
    py = sys.executable
    return [
        ("admit vs raw INSERT", [py, str(BENCH / "bench_admit.py"), "--n", str(args.admit_n)], 120),
        (
            "reviewer over HTTP vs base",
            [
                py,
                str(BENCH / "bench_http.py"),
                "--items",
                str(args.http_items),
                "--rounds",
                str(args.http_rounds),
                "--clients",
                "16",
                "--workers",
                "2",
            ],
            360,
        ),
        (
            "producer over HTTP vs base",
            [
                py,
                str(BENCH / "bench_producer.py"),
                "--per-round",
                str(args.producer_per_round),
                "--rounds",
                str(args.http_rounds),
            ],
            180,
        ),
        (
            "policy-row contention",
            [
                py,
                str(BENCH / "bench_contention.py"),
                "--items",
                str(args.contention_items),
                "--deciders",
                args.contention_levels,
            ],
            240,
        ),
        (
            "keypress -> next card",
            [py, str(BENCH / "bench_keypress.py"), "--decisions", str(args.keypress_decisions)],
            300,
        ),
        (
            "latency at scale",
            [
                py,
                str(BENCH / "bench_scale.py"),
                "--decided",
                str(args.decided),
                "--middle",
                str(args.middle),
                "--pending",
                str(args.pending),
                "--repeat",
                str(args.repeat),
            ],
            480,
        ),
        (
            "two queues admitting at once",
            [
                py,
                str(BENCH / "bench_queues_admit.py"),
                "--per-writer",
                str(args.queues_admit_per_writer),
                "--rounds",
                str(args.queues_admit_rounds),
            ],
            180,
        ),
        (
            "many queues at scale",
            [
                py,
                str(BENCH / "bench_queues_scale.py"),
                "--queues",
                str(args.queues),
                "--pending",
                str(args.queue_pending),
                "--decided",
                str(args.queue_decided),
                "--sample-hours",
                str(args.queue_sample_hours),
                "--repeat",
                str(args.repeat),
            ],
            600,
        ),
        (
            "capacity model",
            [py, str(BENCH / "bench_simulation.py"), "--replications", str(args.replications), "--repeat", "10"],
            120,
        ),
        (
            "red line: sandboxed vs old",
            [py, str(BENCH / "bench_redline.py"), "--rounds", str(args.redline_rounds)],
            180,
        ),
        (
            "review page render, hostile",
            [py, str(BENCH / "bench_render.py"), "--size", str(args.render_size), "--old-sizes", args.render_old_sizes],
            180,
        ),
        (
            "hint redactor, per fragment",
            [py, str(BENCH / "bench_hints.py"), "--repeat", str(args.hints_repeat)],
            120,
        ),
        (
            "webhooks: latency, decide cost",
            [
                py,
                str(BENCH / "bench_webhooks.py"),
                "--items",
                str(args.http_items),
                "--rounds",
                str(args.webhook_rounds),
            ],
            180,
        ),
        (
            "adapters over the client",
            [
                py,
                str(BENCH / "bench_adapters.py"),
                "--per-round",
                str(args.adapters_per_round),
                "--rounds",
                str(args.adapters_rounds),
            ],
            180,
        ),
        (
            "stop rules",
            [py, "-m", "loops", "bench", "stop-rules", "--sigma", "0.1", "--seeds", str(args.seeds), "--json"],
            120,
        ),
    ]


def main() -> None:
    """Run the benches in turn; exit non-zero if any failed or ran out of time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--admit-n", type=int, default=2000)
    parser.add_argument("--http-items", type=int, default=150, help="reviewer bench: items per round per side")
    parser.add_argument("--http-rounds", type=int, default=4, help="reviewer and producer benches: rounds per side")
    parser.add_argument("--producer-per-round", type=int, default=500)
    parser.add_argument("--contention-items", type=int, default=600, help="items per level (16, 32 deciders)")
    parser.add_argument("--keypress-decisions", type=int, default=40)
    parser.add_argument("--decided", type=int, default=1_000_000)
    parser.add_argument("--middle", type=int, default=100_000, help="scale bench: the middle size of history")
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--replications", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--redline-rounds", type=int, default=10)
    parser.add_argument("--contention-levels", default="16,32", help="contention bench: deciders at each level")
    parser.add_argument("--webhook-rounds", type=int, default=4, help="webhooks bench: rounds per side")
    parser.add_argument("--queues-admit-per-writer", type=int, default=100, help="two-queue admission: rows per writer")
    parser.add_argument("--queues-admit-rounds", type=int, default=10)
    parser.add_argument("--queues", type=int, default=100, help="many-queue bench: queues beside the one-queue side")
    parser.add_argument("--queue-pending", type=int, default=10_000, help="many-queue bench: pending per queue")
    parser.add_argument("--queue-decided", type=int, default=1_000, help="many-queue bench: decided per queue")
    parser.add_argument("--queue-sample-hours", type=int, default=24, help="many-queue bench: depth samples per queue")
    parser.add_argument("--adapters-per-round", type=int, default=20, help="adapters bench: outputs per round per side")
    parser.add_argument("--adapters-rounds", type=int, default=5)
    parser.add_argument("--render-size", type=int, default=500_000)
    parser.add_argument("--render-old-sizes", default="2000,4000")
    parser.add_argument("--hints-repeat", type=int, default=30, help="hint redactor bench: calls per timing")
    args = parser.parse_args()
    if args.quick:
        args.admit_n, args.http_items, args.decided, args.pending = 300, 30, 20_000, 2_000
        args.middle = 0  # the smoke run times the two ends only
        args.http_rounds, args.producer_per_round, args.contention_items, args.keypress_decisions = 2, 60, 40, 6
        args.repeat, args.replications, args.seeds = 5, 40, 20
        args.redline_rounds = 2
        # A smoke run checks each bench runs and its checks hold: one level, one round.
        args.contention_levels, args.webhook_rounds = "16", 1
        args.render_size, args.render_old_sizes = 50_000, "1000"
        args.hints_repeat = 3
        # Many queues: still 100 of them, each small; two rounds of each admission side.
        args.queues_admit_per_writer, args.queues_admit_rounds = 40, 2
        args.queue_pending, args.queue_decided, args.queue_sample_hours = 200, 20, 1
        args.adapters_per_round, args.adapters_rounds = 3, 2

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    results: list[tuple[str, str, float]] = []
    started = time.perf_counter()
    for name, argv, limit in plan(args):
        print(f"\n=== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            code = subprocess.run(argv, check=False, cwd=ROOT, env=env, timeout=limit).returncode
            status = "ok" if code == 0 else f"exit {code}"
        except subprocess.TimeoutExpired:
            # subprocess.run kills the child; the benches stop their own servers in finally.
            status = f"timed out after {limit} s"
        results.append((name, status, time.perf_counter() - t0))
    total = time.perf_counter() - started
    print("\n=== summary")
    for name, status, secs in results:
        print(f"  {name:28s} {status:22s} {secs:6.1f} s")
    print(f"  {'total':28s} {'':22s} {total:6.1f} s (budget 900 s)")
    sys.exit(0 if all(status == "ok" for _, status, _ in results) else 1)


if __name__ == "__main__":
    main()
