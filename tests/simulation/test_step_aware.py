"""The step-limit-aware verdict model: the tuner changes queue load and settles."""

import dataclasses

import numpy as np
import pytest

from simulation import PRESETS, Scenario, run_replications
from tests.simulation.helpers import spread

STEP_AWARE = dataclasses.replace(PRESETS["A"], verdict_model="step_aware", production_per_min=6.0)


def _pinned(sc: Scenario, steps: int) -> Scenario:
    return dataclasses.replace(sc, step_limit_start=steps, min_step_limit=steps, max_step_limit=steps)


def _cutoff_odds(sc: Scenario, steps: int) -> tuple[float, float]:
    """(share of loops cut off, approve chance of cut-off output), from the documented model."""
    easy = sc.easy_share * (1 - sc.easy_hazard) ** steps
    hard = (1 - sc.easy_share) * (1 - sc.hard_hazard) ** steps
    approve = (easy * sc.easy_cutoff_approve + hard * sc.hard_cutoff_approve) / (easy + hard)
    return easy + hard, approve


@pytest.mark.parametrize("steps", [3, 15])
def test_it_queues_only_cut_off_loops_at_the_modelled_rate(steps: int) -> None:
    sc = _pinned(STEP_AWARE, steps)
    runs = run_replications(sc, 100, seed=6, workers=1).runs
    cut_share, approve = _cutoff_odds(sc, steps)
    # 99 % intervals: four comparisons here, so a 95 % one would miss by chance too often.
    lo, hi = spread([r.arrived / r.produced for r in runs], level=0.995)
    assert lo <= cut_share <= hi
    lo, hi = spread([r.approved / r.reviewed for r in runs], level=0.995)
    assert lo <= approve <= hi


def test_it_lightens_the_queue_as_the_step_limit_rises() -> None:
    low = run_replications(_pinned(STEP_AWARE, 3), 50, seed=2, workers=1)
    high = run_replications(_pinned(STEP_AWARE, 15), 50, seed=2, workers=1)
    assert high.mean("arrived") < 0.5 * low.mean("arrived")
    assert high.mean("agent_steps") > low.mean("agent_steps")


def test_it_settles_the_tuner_inside_its_bounds_from_either_end() -> None:
    finals = {}
    for start in (3, 15):
        sc = dataclasses.replace(STEP_AWARE, step_limit_start=start, duration_min=240)
        summary = run_replications(sc, 100, seed=9, workers=1)
        finals[start] = spread([r.step_limit_final for r in summary.runs])
        trajectory = np.array(summary.to_dict()["step_limit_trajectory"])
        # not a ratchet: from the bottom it climbs, from the top it falls
        assert (trajectory[-1] > start) if start == 3 else (trajectory[-1] < start)
    assert 3 < finals[3][0] and finals[15][1] < 15
    # both starts reach the same equilibrium
    assert finals[3][0] <= finals[15][1] and finals[15][0] <= finals[3][1]
