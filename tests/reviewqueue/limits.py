"""Rate-limit helpers shared by the sign-in tests."""

from __future__ import annotations

import time

from django_ratelimit.core import _get_window

HOUR = 3600


def address_far_from_a_window_edge(network: str) -> str:
    """A client address in ``network`` (three octets) whose hour-long
    rate-limit window has half an hour or more left (a suite takes less).

    django-ratelimit counts in fixed windows whose edges are spread per key.
    If an edge fell between a test's attempts, they would count in two fresh
    windows and the limit would (rightly) not trip, so a test that expects it
    to trip picks an address whose current window outlasts the test."""
    for host in range(1, 255):
        address = f"{network}.{host}"
        if _get_window(address, HOUR) - time.time() > 1800:
            return address
    raise AssertionError("every address's window ends within half an hour")  # 254 spread edges: cannot happen
