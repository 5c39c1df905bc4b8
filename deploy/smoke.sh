#!/usr/bin/env bash
# The deployment's end-to-end check, from nothing: base images from Debian
# packages, the application image, `compose up` with two web replicas and two
# workers, the producer/reviewer/webhook/metrics check with a killed worker
# and a stopped web replica, a pg_dump restored into a fresh stack, `compose
# down -v`, then the Kubernetes manifests under `podman kube play` with a
# shorter check. Exits 0 only if everything passed; the last line sums it up.
#
#   deploy/smoke.sh                 # as root, with podman (installed with apt if missing)
#   RQ_PORT=18080 deploy/smoke.sh   # the proxy's port on 127.0.0.1
#   SMOKE_KUBE=0 deploy/smoke.sh    # compose only
#
# This machine's quirks (runc, explicit ulimits, pip's local indexes and CA
# bundle) live in deploy/harness/, never in the image or compose.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

export RQ_PORT="${RQ_PORT:-18080}"
PROJECT="${SMOKE_PROJECT:-rqsmoke}"
export RQ_IMAGE="${RQ_IMAGE:-localhost/reviewqueue:smoke}"
export POSTGRES_IMAGE="${POSTGRES_IMAGE:-localhost/reviewqueue-postgres}"
export REDIS_IMAGE="${REDIS_IMAGE:-localhost/reviewqueue-redis}"
export PROXY_IMAGE="${PROXY_IMAGE:-localhost/reviewqueue-nginx}"
export BASE_IMAGE="${BASE_IMAGE:-localhost/reviewqueue-python}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/deploy/harness/containers.conf}"
SMOKE_KUBE="${SMOKE_KUBE:-1}"

started=$(date +%s)
step() { printf '\n=== [%4ss] %s ===\n' "$(($(date +%s) - started))" "$*"; }
work="$(mktemp -d)"
compose() { podman-compose -p "$PROJECT" -f "$ROOT/compose.yaml" "$@"; }
cleanup() {
  local status=$?
  set +e
  if [ "$status" != 0 ]; then
    for c in $(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}'); do
      echo "--- $c (last lines)" >&2
      podman logs --tail 15 "$c" 2>&1 | cut -c1-300 >&2
    done
    # What failed, last, where a truncated CI log still shows it.
    grep -h -E "^  FAIL |expectation\(s\) failed|^podman .*: exit" "$work"/*.log >&2 2>/dev/null
  fi
  [ -n "${check_pid:-}" ] && kill "$check_pid" 2>/dev/null
  compose down -v >/dev/null 2>&1
  podman network rm -f "${PROJECT}_default" >/dev/null 2>&1
  [ -f "$work/kube.yaml" ] && podman kube down "$work/kube.yaml" >/dev/null 2>&1
  podman network rm -f "${PROJECT}-kube" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

step "tools"
if ! command -v podman >/dev/null || ! command -v podman-compose >/dev/null || ! command -v debootstrap >/dev/null ||
  ! command -v runc >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman podman-compose runc debootstrap >/dev/null
fi
podman --version
podman-compose version 2>/dev/null | tail -1
if [ ! -x .venv/bin/python ]; then python3 dev.py setup; fi

step "base images from Debian packages, and the application image"
# The python base first; PostgreSQL, Redis and nginx build beside the
# application image (network and CPU overlap).
deploy/local-base.sh python
deploy/local-base.sh postgres redis nginx >"$work/base.log" 2>&1 &
base_pid=$!
# pip's settings on this host are mounted into the dependency stage only
# (deploy/build-image.sh, the build the README gives).
BUILD_STAGE=localhost/reviewqueue-build:smoke deploy/build-image.sh
wait "$base_pid" || { cat "$work/base.log" >&2; exit 1; }
cat "$work/base.log"
image_mb=$(($(podman image inspect "$RQ_IMAGE" --format '{{.Size}}') / 1000000))
echo "image $RQ_IMAGE: ${image_mb} MB"
for leak in /etc/pip.conf /opt/wheels /opt/pypi; do
  if podman run --rm --entrypoint /bin/sh "$RQ_IMAGE" -c "test -e $leak"; then
    echo "the build's pip settings leaked into the image: $leak" >&2
    exit 1
  fi
done

# The stack's settings for this run: plain http on loopback, short Celery
# limits so a killed worker's loops come back within a minute, webhooks to
# the gateway of the stack's network (relayed to a receiver on loopback).
hook_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export SECRET_KEY="smoke-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export POSTGRES_PASSWORD="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export RQ_ENV_FILE="$work/smoke.env" WEB_REPLICAS=2 WORKER_REPLICAS=2
# The production relations at a small scale (docs/FAULTS.md): hard limit <
# visibility timeout < stale-run age. A message lost with the killed worker
# (a run still "running", never started) is resent by the stale-run sweep,
# within the check's 240 s only if that age is this short.
cat >"$RQ_ENV_FILE" <<EOF
ALLOWED_HOSTS=127.0.0.1,localhost
CSRF_TRUSTED_ORIGINS=http://127.0.0.1:$RQ_PORT
SECURE_SSL_REDIRECT=0
SESSION_COOKIE_SECURE=0
CSRF_COOKIE_SECURE=0
SECURE_HSTS_SECONDS=0
WEBHOOK_ALLOWED_HOSTS=host.containers.internal:$hook_port
WEBHOOK_RETRY_FIRST_SECONDS=2
CELERY_TASK_SOFT_TIME_LIMIT=40
CELERY_TASK_TIME_LIMIT=50
CELERY_VISIBILITY_TIMEOUT=60
REVIEWQUEUE_STALE_RUN_SECONDS=75
LOGIN_RATE_LIMIT=100/m
LOG_LEVEL=WARNING
WEB_CONCURRENCY=2
EOF

# healthy: every web replica's HEALTHCHECK passes and (unless "web-only")
# /health/ answers through the proxy. podman runs no healthchecks by itself
# without systemd, so they are run here.
wait_healthy() {
  local deadline=$(($(date +%s) + 300)) c
  while [ "$(date +%s)" -lt "$deadline" ]; do
    local all=1
    for c in $(podman ps --filter "label=io.podman.compose.project=$PROJECT" --filter "label=com.docker.compose.service=web" --format '{{.Names}}'); do
      podman healthcheck run "$c" >/dev/null 2>&1 || all=0
    done
    if [ "$all" = 1 ] && { [ "${1:-}" = web-only ] || curl -fsS -o /dev/null "http://127.0.0.1:$RQ_PORT/health/"; }; then
      return 0
    fi
    sleep 1
  done
  echo "the stack did not become healthy" >&2
  compose logs --tail 30 2>&1 | tail -80 >&2
  return 1
}
names() { podman ps -a --filter "label=io.podman.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | sort | paste -sd, -; }

step "compose up: web x2, worker x2"
compose down -v >/dev/null 2>&1 || true
up_at=$(date +%s)
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
wait_healthy
healthy_s=$(($(date +%s) - up_at))
echo "healthy ${healthy_s}s after compose up"
gateway=$(podman network inspect "${PROJECT}_default" --format '{{range .Subnets}}{{.Gateway}}{{end}}')

step "end-to-end check with faults"
.venv/bin/python deploy/harness/smoke_check.py --url "http://127.0.0.1:$RQ_PORT" \
  --web "$(names web)" --worker "$(names worker)" --webhook-bind "$gateway" --webhook-port "$hook_port" \
  --state "$work/state" --outputs 200 --tasks 20 --decisions 30 --faults 2>&1 | tee "$work/check.log"
summary=$(grep '^SMOKE ' "$work/check.log" | tail -1 | cut -d' ' -f2-)

step "backup and restore drill"
db=$(names db)
podman exec "$db" pg_dump -U reviewqueue -Fc reviewqueue >"$work/backup.dump"
echo "pg_dump: $(($(stat -c %s "$work/backup.dump") / 1024)) KiB"
compose down -v >/dev/null 2>&1
compose up -d db >/dev/null 2>&1
db=$(names db)
for _ in $(seq 1 60); do podman exec "$db" pg_isready -q -h 127.0.0.1 -U reviewqueue -d reviewqueue && break; sleep 1; done
podman exec -i "$db" pg_restore -U reviewqueue -d reviewqueue --no-owner --exit-on-error <"$work/backup.dump"
# web and what it needs (migrate finds nothing to do); the check reads the database through it.
WEB_REPLICAS=1 compose up -d web >/dev/null 2>&1
wait_healthy web-only
.venv/bin/python deploy/harness/smoke_check.py --url "http://127.0.0.1:$RQ_PORT" --web "$(names web)" \
  --verify-restore "$work/state" 2>&1 | tee -a "$work/check.log"

step "compose down -v"
compose down -v >/dev/null 2>&1
# podman-compose (1.0.x) leaves the project's network behind; the README says so.
podman network rm -f "${PROJECT}_default" >/dev/null
left=$(podman ps -a --filter "label=io.podman.compose.project=$PROJECT" -q | wc -l)
volumes=$(podman volume ls --filter "label=io.podman.compose.project=$PROJECT" -q | wc -l)
networks=$(podman network ls --filter "label=io.podman.compose.project=$PROJECT" -q | wc -l)
[ "$left" = 0 ] && [ "$volumes" = 0 ] && [ "$networks" = 0 ] ||
  { echo "left behind: $left containers, $volumes volumes, $networks networks" >&2; exit 1; }

kube="skipped"
if [ "$SMOKE_KUBE" = 1 ]; then
  step "Kubernetes manifests under podman kube play"
  kube_up=$(date +%s)
  .venv/bin/python deploy/harness/kube_play.py --project "$PROJECT" --port "$RQ_PORT" --out "$work/kube.yaml" 2>&1 | tee "$work/kube.log"
  kube=$(grep '^KUBE ' "$work/kube.log" | tail -1 | cut -d' ' -f2-)
  podman kube down "$work/kube.yaml" >/dev/null 2>&1 || true
  echo "kube check took $(($(date +%s) - kube_up))s"
fi

echo
echo "SMOKE PASSED in $(($(date +%s) - started))s: image ${image_mb} MB, healthy ${healthy_s}s after compose up; $summary; kube: $kube"
