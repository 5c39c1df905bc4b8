"""reviewqueue as an MCP server: coding agents ask a human team for a
verdict through four tools (``request_review``, ``get_verdict``,
``wait_for_verdict``, ``queue_status``), over stdio or Streamable HTTP.

    pip install 'reviewqueue[mcp]'
    REVIEWQUEUE_URL=https://reviewqueue.example REVIEWQUEUE_TOKEN=rq_... python -m reviewqueue.mcp

A thin layer over ``reviewqueue.client.AsyncClient``: no Django, no Celery.
docs/INTEGRATIONS.md shows how to add it to a coding agent.
"""

from __future__ import annotations

from .server import build_server

__all__ = ["build_server"]
