"""Wait until the database answers and, unless told otherwise, has every
migration applied; then exec the command given.

  python deploy/container/wait_ready.py [--db-only] [--retry N] -- gunicorn ...

The migrate one-shot waits with --db-only; web, worker and beat wait for the
migrations too. Compose orders them with depends_on conditions where the tool
honours them; this makes the order hold where it does not (and on Kubernetes,
where a Deployment does not wait on a Job). RQ_WAIT_SECONDS (300) bounds it.
With --retry N the command runs as a child and is started again, up to N
times in all, when it fails: the migration one-shot uses it, so a passing
network hiccup (a name not resolved while the stack starts) does not leave
every other service waiting. Only for commands that are safe to repeat.
"""

import os
import sys
import time


def _ready(db_only: bool) -> str:
    """Empty when ready, else why not."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        connection.ensure_connection()
        if db_only:
            return ""
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        return f"{len(plan)} migrations not applied yet" if plan else ""
    except Exception as exc:  # noqa: BLE001 -- any failure here means "not yet"
        connection.close()
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


def main(argv: list[str]) -> None:
    db_only = "--db-only" in argv
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    if not os.environ.get("SECRET_KEY", "").strip():
        # settings.py would make a key of its own, different in every replica:
        # sessions and CSRF tokens would then fail whenever a request changes replica.
        sys.exit("SECRET_KEY is empty: set it (the same for every service) in .env or the Secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewqueue.settings")
    sys.path.insert(0, "/app")
    import django

    django.setup()
    deadline = time.monotonic() + int(os.environ.get("RQ_WAIT_SECONDS", "300"))
    last = ""
    while why := _ready(db_only):
        if why != last:
            print(f"waiting: {why}", file=sys.stderr, flush=True)
            last = why
        if time.monotonic() > deadline:
            sys.exit(f"gave up waiting: {why}")
        time.sleep(1)
    from django.db import connection

    connection.close()
    retries = int(argv[argv.index("--retry") + 1]) if "--retry" in argv else 0
    if command and retries:
        import subprocess

        for attempt in range(1, retries + 1):
            status = subprocess.run(command, check=False).returncode
            if status == 0:
                return
            print(f"attempt {attempt} of {retries} exited {status}", file=sys.stderr, flush=True)
            time.sleep(3)
        sys.exit(status)
    if command:
        os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
