"""SimPy capacity model of the review queue (pure Python, no Django).

The what-if page and the CLI use this API; see simulation/README.md.
"""

from simulation.model import RunResult, simulate
from simulation.replicate import Summary, recommend_max_production, run_replications
from simulation.scenario import PRESETS, Scenario

__all__ = [
    "PRESETS",
    "RunResult",
    "Scenario",
    "Summary",
    "recommend_max_production",
    "run_replications",
    "simulate",
]
