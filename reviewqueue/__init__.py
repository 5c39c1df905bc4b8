"""reviewqueue: a human-review queue for AI agent loops.

Deliberately empty: importing ``reviewqueue.policy`` (from the simulation)
must not pull in Django or Celery. The Celery app is loaded by the app config.
"""
