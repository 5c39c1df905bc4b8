"""Rendered HTML kept in this process, by a hash of what it was rendered from.

The review page renders the same few texts again and again: a queue's
instructions on every card, an item's output on every reload and renew. The
renderers are deterministic functions of their text, so what they made from
the same bytes is what they would make again: nothing to invalidate. An edit
(of a queue's instructions, say) is a new text, hence a new key; the old
entry falls out when the cache is full. Only texts up to ``max_chars`` are
kept, so the cache's size is bounded by its entries times that.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable


class RenderedCache:
    """A least-recently-used map from (kind, hash of the text) to its HTML; thread-safe."""

    def __init__(self, entries: int, max_chars: int) -> None:
        self.entries = entries
        self.max_chars = max_chars
        self._kept: OrderedDict[tuple[str, bytes], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, text: str, render: Callable[[], str]) -> str:
        """``render()``'s HTML for ``text``, rendered once while it stays in the cache."""
        if len(text) > self.max_chars:
            return render()
        key = (kind, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        html = render()
        with self._lock:
            self._kept[key] = html
            if len(self._kept) > self.entries:
                self._kept.popitem(last=False)
        return html

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
