"""The Celery tasks' registered names, one constant each.

Queued messages, the beat schedule and the services that announce work
(``send_task`` by name, so services never import the task modules above them)
all refer to a task by one of these names; the task modules register under
them. A name a message already carries never changes, wherever its task moves.
No imports: settings, services and tasks all read this module.
"""

from __future__ import annotations

RUN_LOOP = "reviewqueue.tasks.run_loop"
RESUBMIT_STALE_RUNS = "reviewqueue.tasks.resubmit_stale_runs"
SAMPLE_DEPTH = "reviewqueue.tasks.sample_depth"
EXPIRE_LEASES = "reviewqueue.tasks.expire_leases"
ESTIMATE_RELIABILITY = "reviewqueue.tasks.estimate_reliability"
ESCALATE_DISAGREEMENTS = "reviewqueue.tasks.escalate_disagreements"
RUN_SIMULATION = "reviewqueue.tasks.run_simulation"
EVALUATE_ALERTS = "reviewqueue.tasks.evaluate_alerts"
DELIVER_WEBHOOK = "reviewqueue.tasks.webhooks.deliver"
SWEEP_WEBHOOKS = "reviewqueue.tasks.webhooks.sweep"
