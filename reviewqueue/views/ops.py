"""Views of the ops area (filled in by its own change)."""

from django.urls import URLPattern

app_name = "ops"
urlpatterns: list[URLPattern] = []
