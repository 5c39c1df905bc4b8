"""Views of the api area (filled in by its own change)."""

from django.urls import URLPattern

app_name = "api"
urlpatterns: list[URLPattern] = []
