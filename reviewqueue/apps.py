from django.apps import AppConfig


class ReviewqueueConfig(AppConfig):
    name = "reviewqueue"
    verbose_name = "Review queue"

    def ready(self) -> None:
        # Bind @shared_task to this project's Celery app whenever Django starts,
        # and register the tasks, which services.runs publishes by name.
        from . import celery, signals, tasks  # noqa: F401

        # Cached permissions are dropped whenever a role changes.
        signals.connect()
