"""Shared by the LangGraph tests: the example graph loaded as a module, and
webhook deliveries signed by the server's own signing code."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "langgraph_review.py"
SECRET = "whsec_" + base64.b64encode(b"a graph's webhook secret").decode()
GUESS = "whsec_" + base64.b64encode(b"somebody's guess at it").decode()


def load_example() -> ModuleType:
    """docs/examples/langgraph_review.py as a module (it is a script)."""
    if "langgraph_review_example" in sys.modules:
        return sys.modules["langgraph_review_example"]
    spec = importlib.util.spec_from_file_location("langgraph_review_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["langgraph_review_example"] = module
    spec.loader.exec_module(module)
    return module


def event(item_id: int, thread_id: str, kind: str = "item.decided", event_id: str = "evt_1", **data: Any) -> bytes:
    return json.dumps(
        {
            "id": event_id,
            "type": kind,
            "created": "2026-12-01T10:00:00+00:00",
            "item_id": item_id,
            "run_id": f"langgraph:{thread_id}",
            "data": data,
        }
    ).encode()


def signed(body: bytes, *, secret: str = SECRET, age: int = 0) -> dict[str, str]:
    """The headers the server's worker sends with ``body``."""
    from reviewqueue import webhooks

    event_id = json.loads(body)["id"]
    return webhooks.headers_for(SimpleNamespace(event_id=event_id), secret, body, int(time.time()) - age)


def wsgi_post(app: Any, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    """One POST through a WSGI app, as a WSGI server would call it."""
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    started: list[str] = []
    payload = b"".join(app(environ, lambda status, _headers: started.append(status)))
    return int(started[0].split()[0]), json.loads(payload)
