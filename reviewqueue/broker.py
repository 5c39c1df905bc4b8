"""kombu's Redis transport with one fix: a worker survives losing Redis
while it holds unacknowledged tasks.

With acks_late, a worker running a loop always holds an unacknowledged
message. When the broker connection drops, Celery closes the connection and
opens a new one; the old channel then still tries to reach Redis: to put its
unacknowledged messages back while closing, and to acknowledge a task that
finishes afterwards. In kombu 5.7 its transport is already detached by then,
so building a Redis client fails with ``AttributeError: 'NoneType' object has
no attribute 'hostname'`` instead of a connection error. Celery treats that
as unrecoverable and the worker exits: nothing runs until it is restarted
(``tests/reviewqueue/faults/test_faults_redis.py`` reproduces it).

Here a channel whose connection is gone raises the connection error kombu
and Celery handle: the worker logs it and carries on with its new
connection, and the messages the old channel could not restore or
acknowledge, still in Redis's unacked set, come back through the
visibility-timeout restore; ``run_loop`` is idempotent on its run id, so a
finished run delivered again only reports its recorded outcome.

Selected by ``CELERY_BROKER_TRANSPORT`` in settings whenever the broker is Redis.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError("this channel's broker connection is closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
