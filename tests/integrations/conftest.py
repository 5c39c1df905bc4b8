"""The adapters against the live server of the client tests: the same
gunicorn on the test database, tokens issued as an operator issues them,
and a reviewer deciding through the review services."""

from __future__ import annotations

from tests.client.conftest import decide_as_reviewer, issue, live_url, reviewer_user

__all__ = ["decide_as_reviewer", "issue", "live_url", "reviewer_user"]
