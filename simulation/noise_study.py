"""The noisy-reviewer study: ``python -m simulation.noise_study docs``.

Presets A and B, reviewer error e in {0, 0.1, 0.2, 0.3}, the plain and the
noise-aware tuner; prints the README's table (means and 95 % CIs of the
step-limit error and the extra review load) and writes
``simulation_noise.png`` into the given directory. A progress bar on stderr
counts the runs.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on workers or servers

import matplotlib.pyplot as plt

from simulation.cli import NOISE_AWARE_DOUBLE_REVIEW_RATE, NOISE_AWARE_GOLD_RATE
from simulation.plot import _save
from simulation.replicate import Summary, run_replications
from simulation.scenario import PRESETS, TUNERS, Scenario

REPLICATIONS = 200
SEED = 2024
ERRORS = (0.0, 0.1, 0.2, 0.3)
STUDY_PRESETS = ("A", "B")


def scenario(preset: str, error: float, tuner: str) -> Scenario:
    """A preset with noisy reviewers; the noise-aware tuner brings the CLI's default double review and gold."""
    aware = tuner == "noise_aware"
    return dataclasses.replace(
        PRESETS[preset],
        reviewer_error=error,
        tuner_rule=tuner,
        double_review_rate=NOISE_AWARE_DOUBLE_REVIEW_RATE if aware else 0.0,
        gold_rate=NOISE_AWARE_GOLD_RATE if aware else 0.0,
    )


def run_study(replications: int = REPLICATIONS, seed: int = SEED) -> dict[tuple[str, float, str], Summary]:
    from tqdm import tqdm

    keys = [(p, e, t) for p in STUDY_PRESETS for e in ERRORS for t in TUNERS]
    out = {}
    with tqdm(total=len(keys) * replications, unit="run", file=sys.stderr, disable=None) as bar:
        for key in keys:
            done_before = bar.n

            def progress(done: int, _total: int, base: int = done_before) -> None:
                bar.update(base + done - bar.n)

            out[key] = run_replications(scenario(*key), replications, seed, progress)
    return out


def _cell(d: dict, key: str, digits: int) -> str:
    """A mean and its 95 % CI; ``key`` names the CI (``<key>_ci95``), the mean is ``<key>_mean`` or ``<key>``."""
    mean = d.get(f"{key}_mean", d.get(key))
    lo, hi = d[f"{key}_ci95"]
    return f"{mean:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def table(results: dict[tuple[str, float, str], Summary]) -> str:
    header = (
        "| preset | e | plain: step-limit error | noise-aware: step-limit error | cut | "
        "noise-aware: extra review load % | overflow % plain / noise-aware |\n|---|---|---|---|---|---|---|"
    )
    rows = [header]
    for preset in STUDY_PRESETS:
        for e in ERRORS:
            plain = results[(preset, e, "plain")].to_dict()
            aware = results[(preset, e, "noise_aware")].to_dict()
            base = plain["step_limit_abs_error_mean"]
            cut = f"{100 * (1 - aware['step_limit_abs_error_mean'] / base):.0f} %" if base > 0 else "-"
            rows.append(
                f"| {preset} | {e:g} | {_cell(plain, 'step_limit_abs_error', 2)} "
                f"| {_cell(aware, 'step_limit_abs_error', 2)} | {cut} "
                f"| {_cell(aware, 'extra_review_load_pct', 1)} "
                f"| {plain['overflow_pct']:.1f} / {aware['overflow_pct']:.1f} |"
            )
    return "\n".join(rows)


def plot(results: dict[tuple[str, float, str], Summary], path: str | Path) -> Path:
    """Step-limit error against reviewer error, one panel per preset, with 95 % CIs."""
    fig, axes = plt.subplots(1, len(STUDY_PRESETS), figsize=(9, 4), sharey=True)
    for ax, preset in zip(axes, STUDY_PRESETS, strict=True):
        for tuner in TUNERS:
            ds = [results[(preset, e, tuner)].to_dict() for e in ERRORS]
            means = [d["step_limit_abs_error_mean"] for d in ds]
            lows = [m - d["step_limit_abs_error_ci95"][0] for m, d in zip(means, ds, strict=True)]
            highs = [d["step_limit_abs_error_ci95"][1] - m for m, d in zip(means, ds, strict=True)]
            ax.errorbar(ERRORS, means, yerr=[lows, highs], marker="o", capsize=3, label=tuner.replace("_", "-"))
        ax.set_title(f"Preset {preset}")
        ax.set_xlabel("reviewer error e")
        ax.set_xticks(ERRORS)
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("|step limit - noise-free tuner's| (mean, 95 % CI)")
    runs = next(iter(results.values())).replications
    fig.suptitle(f"Step-limit error under noisy reviewers, {runs} replications", fontsize=10)
    return _save(fig, path)


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    results = run_study()
    print(table(results))
    plot(results, out / "simulation_noise.png")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs")
