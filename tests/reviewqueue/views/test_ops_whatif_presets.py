"""Presets live in one catalogue (simulation.PRESET_CATALOGUE), each with its
description: the what-if page lists whatever the catalogue holds, and a new
preset needs no second edit to be shown or described."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import simulation
from simulation import PRESET_CATALOGUE, PRESET_DESCRIPTIONS, PRESETS, Preset, Scenario

pytestmark = pytest.mark.django_db


def test_the_scenarios_and_descriptions_are_views_of_the_catalogue() -> None:
    assert PRESETS == {name: preset.scenario for name, preset in PRESET_CATALOGUE.items()}
    assert PRESET_DESCRIPTIONS == {name: preset.description for name, preset in PRESET_CATALOGUE.items()}


def test_a_preset_added_to_the_catalogue_is_listed_and_described(
    client: Client, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = Preset(Scenario(production_per_min=1.0, review_per_min=4.0), "Quiet: one output a minute.")
    monkeypatch.setattr(simulation, "PRESET_CATALOGUE", {**PRESET_CATALOGUE, "E": added})
    client.force_login(operator)
    body = client.get(reverse("ops:whatif")).content.decode()
    assert 'id="preset-E-about"' in body
    assert "Quiet: one output a minute." in body
