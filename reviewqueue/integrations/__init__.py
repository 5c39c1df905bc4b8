"""Adapters that put reviewqueue where agents are built; each is an optional
extra and a thin layer over ``reviewqueue.client`` (no Django, no Celery):

- ``reviewqueue.integrations.langgraph`` (``pip install 'reviewqueue[langgraph]'``):
  a LangGraph node asks for review with ``interrupt()``; a verdict resumes it.

The MCP server is ``reviewqueue.mcp`` (``pip install 'reviewqueue[mcp]'``).
"""
