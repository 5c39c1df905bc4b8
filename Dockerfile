# One image for web (gunicorn), worker (Celery) and beat: the command differs.
#
#   docker build -t reviewqueue .
#   podman build --build-arg BASE_IMAGE=localhost/reviewqueue-python -t reviewqueue .
#
# BASE_IMAGE is any Debian bookworm image with python3 (3.11) and its venv
# module: the official one, or one built from Debian packages alone where no
# container registry is reachable (deploy/local-base.sh). No secret is baked
# in: SECRET_KEY, DATABASE_URL and REDIS_URL come from the environment at run
# time (compose.yaml, deploy/kubernetes/).
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
WORKDIR /src
# Dependencies first, pinned in pyproject.toml, so a code change reuses this layer.
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      >requirements.txt \
 && /opt/venv/bin/pip install --quiet -r requirements.txt

FROM ${BASE_IMAGE} AS runtime
# bubblewrap sandboxes every red-line candidate and check (docs/SECURITY.md);
# a base that ships it (deploy/local-base.sh) skips apt.
RUN command -v bwrap >/dev/null || { apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null \
    && rm -rf /var/lib/apt/lists/*; }
RUN groupadd --system --gid 10001 reviewqueue \
 && useradd --system --uid 10001 --gid reviewqueue --home-dir /app --shell /usr/sbin/nologin reviewqueue
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY deploy/container ./deploy/container
# The project runs from its source tree (PYTHONPATH): BASE_DIR, templates and
# static files are where settings.py expects them.
COPY reviewqueue ./reviewqueue
COPY loops ./loops
COPY simulation ./simulation
ENV PATH=/opt/venv/bin:$PATH PYTHONPATH=/app \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    REVIEWQUEUE_VAR_DIR=/tmp/reviewqueue \
    STATIC_ROOT=/app/staticfiles \
    REVIEWQUEUE_MANIFEST_STATIC=1 \
    DEBUG=0
# Static files collected (hashed, compressed) at build time with a throwaway
# key: nothing here needs the real one, and it is not kept.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v 0 \
 && python -m compileall -q reviewqueue loops simulation
USER reviewqueue:reviewqueue
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "/app/deploy/container/healthcheck.py"]
# web; the worker and beat run celery instead (compose.yaml). Each waits for
# the database and the migrations first.
CMD ["python", "/app/deploy/container/wait_ready.py", "--", \
     "gunicorn", "--config", "/app/deploy/container/gunicorn.conf.py", "reviewqueue.wsgi:application"]
