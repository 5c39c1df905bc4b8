#!/usr/bin/env bash
# Build the application image with podman the way pip on this host fetches
# packages: where PyPI is reached through a TLS-intercepting proxy or local
# indexes, pip inside a plain `podman build` fails ("certificate verify
# failed"). The host's pip settings (CA bundle, indexes, constraints; see
# deploy/harness/pip_for_build.py) are bind-mounted into the dependency stage
# for the build only; the final image is built from that cached stage with
# nothing mounted, so none of it lands in the image.
#
#   deploy/build-image.sh                 # RQ_IMAGE and BASE_IMAGE from the environment, else .env
#   RQ_IMAGE=reviewqueue:1.2 deploy/build-image.sh
#
# The image is in docker format, which keeps its HEALTHCHECK (podman's
# default OCI format drops it).
set -euo pipefail
cd "$(dirname "$0")/.."

from_env_file() { [ -f .env ] && sed -n "s/^$1=//p" .env | tail -1; }
RQ_IMAGE="${RQ_IMAGE:-$(from_env_file RQ_IMAGE)}"
RQ_IMAGE="${RQ_IMAGE:-reviewqueue:latest}"
BASE_IMAGE="${BASE_IMAGE:-$(from_env_file BASE_IMAGE)}"
BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim-bookworm}"
PODMAN="${PODMAN:-podman}"
# The dependency stage, tagged so that it stays in the layer cache.
BUILD_STAGE="${BUILD_STAGE:-localhost/reviewqueue-build:latest}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mapfile -t pip_mounts < <(python3 deploy/harness/pip_for_build.py "$work/pip")
echo "building $RQ_IMAGE from $BASE_IMAGE" >&2
$PODMAN build --quiet --format docker --network host "${pip_mounts[@]}" --target build \
  --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$BUILD_STAGE" . >/dev/null 2>"$work/build.log" ||
  { grep -v '^WARNING: Location' "$work/build.log" | tail -30 >&2; exit 1; }
$PODMAN build --quiet --format docker --network host --build-arg BASE_IMAGE="$BASE_IMAGE" \
  -t "$RQ_IMAGE" . >/dev/null 2>"$work/build.log" || { tail -30 "$work/build.log" >&2; exit 1; }
echo "$RQ_IMAGE: $(($($PODMAN image inspect "$RQ_IMAGE" --format '{{.Size}}') / 1000000)) MB" >&2
