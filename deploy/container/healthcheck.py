"""The image's HEALTHCHECK, for whichever role the container runs.

web (gunicorn): GET /health/, which answers only when the database does. The
Host header is the first of ALLOWED_HOSTS, so Django accepts it; redirects
are not followed (a 301 to https would be a misconfiguration, not health).
worker and beat (celery): the broker answers a PING. Before the command has
started (still waiting for migrations), the container is not healthy yet.
"""

import os
import sys
import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _role() -> str:
    with open("/proc/1/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    return "celery" if any(a.endswith(b"celery") for a in argv) else "web"


def _broker() -> int:
    import redis

    try:
        redis.Redis.from_url(os.environ.get("REDIS_URL", ""), socket_timeout=4).ping()
        return 0
    except (redis.RedisError, ValueError) as exc:
        print(f"unhealthy: broker: {exc}", file=sys.stderr)
        return 1


def main() -> int:
    if _role() == "celery":
        return _broker()
    hosts = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost").split(",") if h.strip()]
    host = hosts[0].lstrip(".") if hosts and hosts[0] != "*" else "localhost"
    request = urllib.request.Request(
        "http://127.0.0.1:8000/health/", headers={"Host": host, "X-Forwarded-Proto": "https"}
    )
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
