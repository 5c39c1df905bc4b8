"""gunicorn in the container: every knob from the environment (WEB_CONCURRENCY
is read by gunicorn itself; GUNICORN_THREADS and GUNICORN_TIMEOUT here)."""

import os

bind = "0.0.0.0:8000"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# nginx keeps connections to the replicas open (upstream keepalive, closed by
# nginx after 60 s idle). gunicorn must not close them first: a request nginx
# writes onto a connection gunicorn has just closed is reset, and a reset POST
# is not retried, so the reviewer would see a 502.
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "75"))
# Only the proxy on the private network reaches this port; it sets X-Forwarded-For.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "*")
accesslog = "-"
errorlog = "-"
# Temporary files in memory: the container's file system may be read-only.
worker_tmp_dir = "/dev/shm"
