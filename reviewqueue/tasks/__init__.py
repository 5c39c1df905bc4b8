"""The project's Celery tasks: thin entry points that take ids or plain
dicts, call a service, and map retryable errors to retries. Each is safe to
run twice because the service it calls is.

Every task is registered under an explicit, stable name (``reviewqueue.tasks.*``),
the names queued messages, the beat schedule and routes refer to; moving a
task between modules must not change it. The worker autodiscovers this
package, which imports its modules here so that all of them register.
"""

from .loops import resubmit_stale_runs, run_loop
from .periodic import (
    escalate_disagreements,
    estimate_reliability,
    evaluate_alerts,
    expire_leases,
    run_simulation,
    sample_depth,
)
from .webhooks import deliver, sweep

__all__ = [
    "deliver",
    "escalate_disagreements",
    "estimate_reliability",
    "evaluate_alerts",
    "expire_leases",
    "resubmit_stale_runs",
    "run_loop",
    "run_simulation",
    "sample_depth",
    "sweep",
]
