from django.apps import AppConfig


class ReviewqueueConfig(AppConfig):
    name = "reviewqueue"
    verbose_name = "Review queue"

    def ready(self) -> None:
        # Bind @shared_task to this project's Celery app whenever Django starts.
        from . import celery  # noqa: F401
