"""Regenerate the README's figures and tables: ``python -m simulation.figures docs``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from simulation.plot import plot_compare
from simulation.replicate import Summary, run_replications
from simulation.scenario import PRESETS, Scenario

REPLICATIONS = 400
SEED = 2024


def _row(label: str, s: Summary) -> str:
    d = s.to_dict()
    lost = " / ".join(f"{d['shed_by_priority'][k]:.1f}" for k in sorted(d["shed_by_priority"]))
    lo, hi = d["overflow_pct_ci95"]
    return (
        f"| {label} | {d['overflow_pct']:.1f} ({lo:.1f}-{hi:.1f}) | {lost} | {d['time_in_draft_min']:.1f} "
        f"| {d['mean_wait_min']:.1f} | {d['p95_wait_min']:.1f} | {d['reviewed']:.0f} "
        f"| {100 * d['approved'] / max(d['reviewed'], 1):.0f} | {d['agent_steps']:.0f} "
        f"| {d['step_limit_final']:.1f} |"
    )


def backpressure_table(scenarios: dict[str, Scenario]) -> tuple[str, dict[str, Summary]]:
    header = (
        "| run | overflow % (95 % CI) | lost p0 / p1 / p2 | draft min | mean wait | p95 wait "
        "| reviewed | approved % | agent steps | step limit at end |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    summaries = {k: run_replications(sc, REPLICATIONS, SEED) for k, sc in scenarios.items()}
    return "\n".join([header, *(_row(k, s) for k, s in summaries.items())]), summaries


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Scenario] = {}
    for preset in ("B", "D"):
        for model in ("article", "poisson"):
            for bp in (False, True):
                sc = dataclasses.replace(PRESETS[preset], model=model, backpressure=bp)
                runs[f"{preset} {model} backpressure {'on' if bp else 'off'}"] = sc
    table, summaries = backpressure_table(runs)
    print(table)
    plot_compare(
        {
            "backpressure off": summaries["B poisson backpressure off"],
            "backpressure on": summaries["B poisson backpressure on"],
        },
        out / "simulation_backpressure.png",
        f"Preset B, poisson model, {REPLICATIONS} replications",
    )
    heavy = dataclasses.replace(PRESETS["B"], production_per_min=12.0)
    tuner_runs = {
        "article verdicts, 5/min": PRESETS["B"],
        "step-aware, 12 loops/min": dataclasses.replace(heavy, verdict_model="step_aware"),
        "step-aware, 12 loops/min, backpressure on": dataclasses.replace(
            heavy, verdict_model="step_aware", backpressure=True
        ),
    }
    table2, tuned = backpressure_table(tuner_runs)
    print()
    print(table2)
    plot_compare(tuned, out / "simulation_tuner.png", f"Step limit and load, {REPLICATIONS} replications")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs")
