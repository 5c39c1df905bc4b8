"""The Celery app, wired once; tasks live in the reviewqueue/tasks/ package."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewqueue.settings")

app = Celery("reviewqueue")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
