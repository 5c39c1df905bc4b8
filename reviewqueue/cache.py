"""The cache on the embedded defaults: Django's database cache, shared by every
process that uses the database (web workers, Celery workers), so a limit
counted in it (the sign-in rate limit) holds across processes. At scale,
REDIS_URL replaces it with Redis. The table is created by a migration
(0005_shared_cache_table), so `migrate` is all a fresh checkout, the tests and
CI need."""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.db import DatabaseCache as DjangoDatabaseCache
from django.db import connections, router, transaction

TABLE = "reviewqueue_cache"


class DatabaseCache(DjangoDatabaseCache):
    """Django's database cache with an atomic incr().

    Django's incr() is a read followed by a write, so two processes counting
    at once could both read 4 and both write 5, and a guesser hammering the
    sign-in form from many connections would get more tries than the limit.
    Here the read and the write share one transaction holding the write lock:
    SQLite's IMMEDIATE transactions (settings.py) take it at BEGIN, and on
    PostgreSQL the row is locked with SELECT ... FOR UPDATE first."""

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> Any:
        alias = router.db_for_write(self.cache_model_class)
        connection = connections[alias]
        with transaction.atomic(using=alias):
            if connection.features.has_select_for_update:
                table = connection.ops.quote_name(self._table)
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"SELECT cache_key FROM {table} WHERE cache_key = %s FOR UPDATE",
                        [self.make_and_validate_key(key, version=version)],
                    )
            return super().incr(key, delta, version)
