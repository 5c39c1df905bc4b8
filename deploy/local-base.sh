#!/usr/bin/env bash
# Base images from Debian packages alone, for machines (and CI) that reach
# Debian's and PyPI's registries but no container registry:
#
#   localhost/reviewqueue-debian    debootstrap's minimal bookworm, imported once
#   localhost/reviewqueue-python    Python 3.11 (Debian's), venv, bubblewrap
#   localhost/reviewqueue-postgres  PostgreSQL 15, started like the official image
#   localhost/reviewqueue-redis     Redis 7
#   localhost/reviewqueue-nginx     nginx, reading /etc/nginx/conf.d like the official image
#
# One debootstrap makes the root file system every other image starts from;
# .deb files and apt lists are kept in a cache directory bind-mounted into the
# builds (never in an image), so a second run downloads nothing. An image
# that already exists is kept unless REBUILD=1.
#
#   deploy/local-base.sh            # needs root, debootstrap and podman
#   deploy/local-base.sh python     # only these (the debian root is made first if missing)
#   RQ_BASE_CACHE=/var/cache/x DEBIAN_MIRROR=http://mirror/debian deploy/local-base.sh
set -euo pipefail

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
CACHE="${RQ_BASE_CACHE:-/var/cache/reviewqueue-base}"
REBUILD="${REBUILD:-0}"
PODMAN="${PODMAN:-podman}"

have() { [ "$REBUILD" != 1 ] && $PODMAN image exists "$1"; }
say() { printf '[local-base] %s\n' "$*" >&2; }

mkdir -p "$CACHE/debs" "$CACHE/apt-archives" "$CACHE/apt-lists"

if ! have localhost/reviewqueue-debian:$SUITE; then
  root="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  say "debootstrap $SUITE from $MIRROR"
  debootstrap --variant=minbase --include=ca-certificates --cache-dir="$CACHE/debs" \
    "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
    tail -20 "$CACHE/debootstrap.log" >&2
    exit 1
  }
  # Same sources as the image will use; no lists or .debs left inside.
  printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
    "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SUITE" >"$root/etc/apt/sources.list"
  # Builds bind-mount the cache over /var/cache/apt/archives: apt must keep what it fetched.
  rm -f "$root/etc/apt/apt.conf.d/docker-clean"
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$root/etc/apt/apt.conf.d/90reviewqueue"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
  say "import localhost/reviewqueue-debian:$SUITE"
  tar -C "$root" --numeric-owner -c . |
    $PODMAN import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - localhost/reviewqueue-debian:$SUITE >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

WANTED="${*:-python postgres redis nginx}"

# build NAME: the Containerfile comes on stdin, FROM the imported root.
build() {
  local name="$1"
  case " $WANTED " in *" $name "*) ;; *)
    cat >/dev/null
    return
    ;;
  esac
  if have "localhost/reviewqueue-$name"; then
    say "localhost/reviewqueue-$name exists (REBUILD=1 to rebuild)"
    cat >/dev/null
    return
  fi
  say "build localhost/reviewqueue-$name"
  $PODMAN build --quiet --network host --pull=never \
    -v "$CACHE/apt-archives:/var/cache/apt/archives:z" -v "$CACHE/apt-lists:/var/lib/apt/lists:z" \
    -t "localhost/reviewqueue-$name" -f - "$CACHE" >/dev/null
}

apt_install='apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq'

build python <<EOF2
FROM localhost/reviewqueue-debian:$SUITE
RUN $apt_install python3 python3-venv bubblewrap >/dev/null && ln -s /usr/bin/python3 /usr/local/bin/python
CMD ["python3"]
EOF2

build postgres <<EOF2
FROM localhost/reviewqueue-debian:$SUITE
RUN $apt_install postgresql-15 >/dev/null && rm -rf /var/lib/postgresql/15 /etc/postgresql/15 \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
 && printf '%s\n' '#!/bin/sh' \
  '# The official image'"'"'s interface: POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, PGDATA.' \
  'set -e' \
  'export PATH=/usr/lib/postgresql/15/bin:\$PATH PGDATA="\${PGDATA:-/var/lib/postgresql/data}"' \
  'if [ ! -s "\$PGDATA/PG_VERSION" ]; then' \
  '  pw=\$(mktemp); printf %s "\$POSTGRES_PASSWORD" >"\$pw"' \
  '  initdb -U "\${POSTGRES_USER:-postgres}" --pwfile="\$pw" --auth-local=trust --auth-host=scram-sha-256 >/dev/null; rm -f "\$pw"' \
  '  echo "host all all all scram-sha-256" >>"\$PGDATA/pg_hba.conf"' \
  '  pg_ctl -o "-c listen_addresses=" -w start >/dev/null' \
  '  db="\${POSTGRES_DB:-\${POSTGRES_USER:-postgres}}"' \
  '  [ "\$db" = postgres ] || createdb -U "\${POSTGRES_USER:-postgres}" "\$db"' \
  '  pg_ctl -m fast -w stop >/dev/null' \
  'fi' \
  'exec "\$@"' >/usr/local/bin/docker-entrypoint.sh && chmod 755 /usr/local/bin/docker-entrypoint.sh \
 && ln -s /usr/lib/postgresql/15/bin/postgres /usr/local/bin/postgres
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PGDATA=/var/lib/postgresql/data
USER postgres
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres", "-c", "listen_addresses=*"]
STOPSIGNAL SIGINT
EOF2

build redis <<EOF2
FROM localhost/reviewqueue-debian:$SUITE
RUN $apt_install redis-server >/dev/null && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
CMD ["redis-server", "--protected-mode", "no"]
EOF2

build nginx <<EOF2
FROM localhost/reviewqueue-debian:$SUITE
RUN $apt_install nginx >/dev/null \
 && rm -f /etc/nginx/sites-enabled/default \
 && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log
CMD ["nginx", "-g", "daemon off;"]
STOPSIGNAL SIGQUIT
EOF2

$PODMAN images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep reviewqueue- >&2 || true
