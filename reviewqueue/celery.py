"""The Celery app, wired once; tasks live in the reviewqueue/tasks/ package."""

import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewqueue.settings")

app = Celery("reviewqueue")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _django_logging(**kwargs: Any) -> None:
    """Workers and beat log as the web does (JSON lines at LOG_LEVEL, with each
    record's structured fields) instead of Celery's own plain format, which
    drops them."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
