from django.apps import AppConfig


class ReviewqueueConfig(AppConfig):
    name = "reviewqueue"
    verbose_name = "Review queue"
