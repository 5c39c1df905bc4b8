"""The migration to scopes: every existing token keeps exactly what it could
do before (outputs and tasks, plus metrics where it was granted), and existing
items and runs land in the per-producer constraints unchanged."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("reviewqueue", "0005_queue_instructions")]
AFTER = [("reviewqueue", "0006_token_scopes_and_keys_per_producer")]


def _migrate(target: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor


def test_existing_tokens_keep_their_rights_as_scopes() -> None:
    old = _migrate(BEFORE).loader.project_state(BEFORE).apps
    OldToken = old.get_model("reviewqueue", "ApiToken")
    OldToken.objects.create(name="pusher", prefix="aaaaaaaa", token_hash="h1")
    OldToken.objects.create(name="scraper", prefix="bbbbbbbb", token_hash="h2", can_read_metrics=True)
    OldRun = old.get_model("reviewqueue", "LoopRun")
    OldRun.objects.create(run_id="r-1", task_id="t", task={})
    try:
        new = _migrate(AFTER).loader.project_state(AFTER).apps
        Token = new.get_model("reviewqueue", "ApiToken")
        assert dict(Token.objects.values_list("name", "scopes")) == {
            "pusher": ["outputs", "tasks"],
            "scraper": ["outputs", "tasks", "metrics"],
        }
        assert list(new.get_model("reviewqueue", "LoopRun").objects.values_list("producer", "run_id")) == [("", "r-1")]
        # and back: the metrics right is restored from the scope
        back = _migrate(BEFORE).loader.project_state(BEFORE).apps
        rights = dict(back.get_model("reviewqueue", "ApiToken").objects.values_list("name", "can_read_metrics"))
        assert rights == {"pusher": False, "scraper": True}
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
