"""Prometheus metrics at /metrics (filled in by its own change)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
