"""Views of the review area (filled in by its own change)."""

from django.urls import URLPattern

app_name = "review"
urlpatterns: list[URLPattern] = []
