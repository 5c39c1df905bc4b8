"""Sessions at scale: read from the cache (Redis), written through to the
database, which stays the record.

Django's ``cached_db`` store saves the per-request session SELECT, but some of
its cache calls are unguarded (the key-collision check when a session is
created, the delete when one is cycled at sign-in or ended at sign-out, the
refill after a miss), so with Redis down sign-in would fail. This store makes
every cache call optional: a cache that is down, flushed or evicted costs the
database query, never the session. A flushed cache loses nothing.

One limit, as with Django's own store: a sign-out while the cache is
unreachable deletes the database row but cannot drop the cached copy, which
then lives until its expiry if the cache keeps its data across the outage.
The failure is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.sessions.backends.cached_db import SessionStore as CachedDBStore
from django.contrib.sessions.backends.db import SessionStore as DBStore

log = logging.getLogger(__name__)


class SessionStore(CachedDBStore):
    def _cache_call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._cache, method)(*args)
        except Exception:  # noqa: BLE001 - the database has the session; the cache is a shortcut
            log.warning("session cache unreachable on %s; the database answers", method)
            return None

    def load(self) -> dict[str, Any]:
        data = self._cache_call("get", self.cache_key)
        if data is not None:
            return data
        stored = self._get_session_from_db()
        if not stored:
            return {}
        data = self.decode(stored.session_data)
        self._cache_call("set", self.cache_key, data, self.get_expiry_age(expiry=stored.expire_date))
        return data

    def exists(self, session_key: str | None) -> bool:
        # Asked only when a new key is made: the database is the record.
        return DBStore.exists(self, session_key)

    def save(self, must_create: bool = False) -> None:
        DBStore.save(self, must_create)
        self._cache_call("set", self.cache_key, self._session, self.get_expiry_age())

    def delete(self, session_key: str | None = None) -> None:
        DBStore.delete(self, session_key)
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        try:
            self._cache.delete(self.cache_key_prefix + session_key)
        except Exception:  # noqa: BLE001 - the row is gone; its cached copy outlives it (module docstring)
            log.error("session cache unreachable: a deleted session stays cached until it expires")
