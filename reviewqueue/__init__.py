"""reviewqueue: a human-review queue for AI agent loops."""

from .celery import app as celery_app

__all__ = ["celery_app"]
