"""Figures: queue depth over time against the watermarks, and the tuner's trajectory."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on workers or servers

import matplotlib.pyplot as plt
import numpy as np

from simulation.replicate import Summary


def _depth_band(summary: Summary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    series = np.array([r.depth_series for r in summary.runs], dtype=float)
    return series.mean(axis=0), np.percentile(series, 5, axis=0), np.percentile(series, 95, axis=0)


def _marks(ax: plt.Axes, summary: Summary) -> None:
    sc = summary.scenario
    ax.axhline(sc.capacity, color="black", lw=1, label=f"capacity {sc.capacity}")
    ax.axhline(sc.high_watermark * sc.capacity, color="tab:red", ls="--", lw=1, label="high watermark")
    ax.axhline(sc.low_watermark * sc.capacity, color="tab:green", ls="--", lw=1, label="low watermark")


def _save(fig: plt.Figure, path: str | Path) -> Path:
    """Lay out, write as PNG and release the figure."""
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_depth(summary: Summary, path: str | Path, title: str = "") -> Path:
    """Mean depth per minute (with the 5-95 % band across replications) and the watermarks."""
    mean, lo, hi = _depth_band(summary)
    minutes = np.arange(len(mean))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(minutes, mean, color="tab:blue", label="mean depth")
    if summary.replications > 1:
        ax.fill_between(minutes, lo, hi, color="tab:blue", alpha=0.2, label="5-95 % of runs")
    _marks(ax, summary)
    ax.set_xlabel("minute")
    ax.set_ylabel("items in queue")
    sc = summary.scenario
    ax.set_title(
        title
        or f"{sc.model} model, production {sc.production_per_min:g}/min, review "
        f"{sc.review_per_min:g}/min, backpressure {'on' if sc.backpressure else 'off'}"
    )
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def plot_compare(summaries: dict[str, Summary], path: str | Path, title: str) -> Path:
    """Depth (top) and mean step limit (bottom) of several summaries of one preset."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for label, summary in summaries.items():
        mean, lo, hi = _depth_band(summary)
        minutes = np.arange(len(mean))
        (line,) = top.plot(minutes, mean, label=label)
        top.fill_between(minutes, lo, hi, color=line.get_color(), alpha=0.15)
        steps = np.mean([r.step_limit_trajectory for r in summary.runs], axis=0)
        bottom.plot(minutes, steps, color=line.get_color(), label=label)
    _marks(top, next(iter(summaries.values())))
    top.set_ylabel("items in queue (mean, 5-95 %)")
    top.set_title(title)
    top.legend(loc="lower right", fontsize=8)
    bottom.set_ylabel("step limit (mean)")
    bottom.set_xlabel("minute")
    bottom.legend(loc="best", fontsize=8)
    return _save(fig, path)
