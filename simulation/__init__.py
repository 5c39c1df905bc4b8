"""SimPy capacity model of the review queue (pure Python, no Django).

The what-if page and the CLI use this API; see simulation/README.md.
"""

from simulation.analytic import stable_production_rate
from simulation.model import RunResult, simulate
from simulation.multi import MultiScenario, MultiSummary, QueueSpec, run_multi_replications, what_if_added
from simulation.replicate import Summary, recommend_max_production, run_replications
from simulation.scenario import PRESET_CATALOGUE, PRESET_DESCRIPTIONS, PRESETS, Preset, Scenario

__all__ = [
    "PRESETS",
    "PRESET_CATALOGUE",
    "PRESET_DESCRIPTIONS",
    "MultiScenario",
    "MultiSummary",
    "Preset",
    "QueueSpec",
    "RunResult",
    "Scenario",
    "Summary",
    "recommend_max_production",
    "run_multi_replications",
    "run_replications",
    "simulate",
    "stable_production_rate",
    "what_if_added",
]
