#!/usr/bin/env python3
"""The two set-up commands, for a fresh clone with only Python 3.11:

    python3 dev.py demo     # web + Celery worker + loops filling the queue
    python3 dev.py test     # the test suite (extra args go to pytest)

Both create ./.venv and install the pinned dependencies on first use.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
BWRAP = Path("/usr/bin/bwrap")


def sh(*args: str | Path, env: dict[str, str] | None = None, log: IO[bytes] | None = None) -> None:
    """Run a command; its output goes to ``log`` when given, else to the terminal."""
    subprocess.run([str(a) for a in args], check=True, cwd=ROOT, env=env, stdout=log, stderr=log)


def ensure_venv() -> None:
    """Create the virtualenv and install the project; repeat only when pyproject.toml changed."""
    stamp = VENV / ".installed"
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    if stamp.exists() and stamp.read_bytes() == pyproject:
        return
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"reviewqueue needs Python 3.11 (Django 5.2 LTS); this is {sys.version.split()[0]}")
    if not PY.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing pinned dependencies into .venv (first run only) ...", flush=True)
    sh(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    sh(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]")
    stamp.write_bytes(pyproject)


def apt_install(*packages: str) -> bool:
    """Install Debian packages when we may (root with apt); False when we may not."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    print(f"installing Debian's {' and '.join(packages)} ...", flush=True)
    sh("apt-get", "update", "-qq")
    sh("apt-get", "install", "-y", "-qq", *packages, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return True


def ensure_bubblewrap() -> None:
    """The red line's sandbox. Without it, loops refuse producer-submitted checks (fail closed)."""
    if not BWRAP.exists():
        apt_install("bubblewrap")


def redline_env(env: dict[str, str]) -> dict[str, str]:
    """The demo starts on any machine: where the red line's sandbox cannot
    run, it runs the built-in suite unsandboxed (REDLINE_SANDBOX=none) and
    says why; producers' tasks with checks are then refused."""
    if env.get("REDLINE_SANDBOX"):
        return env
    code = "from loops import sandbox; s = sandbox.status(); print('' if s.sandboxed else s.reason)"
    probe = subprocess.run([str(PY), "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    reason = probe.stdout.strip() or (probe.stderr.strip().splitlines() or [""])[-1]
    if probe.returncode == 0 and not reason:
        return env
    print(
        f"the red line's sandbox cannot run here ({reason}).\n"
        "the demo sets REDLINE_SANDBOX=none: the built-in tasks run without a sandbox, "
        "and producers' tasks with checks are refused (install bubblewrap to change that)",
        flush=True,
    )
    return {**env, "REDLINE_SANDBOX": "none"}


def ensure_chromium() -> None:
    if CHROMIUM.exists():
        return
    if apt_install("chromium"):
        return
    sys.exit(
        f"browser tests need Chromium at {CHROMIUM}: install it (apt-get install chromium) "
        "or run the fast suite: python3 dev.py test -m 'not browser'"
    )


def test(args: list[str]) -> int:
    ensure_venv()
    ensure_bubblewrap()
    if "not browser" not in " ".join(args):
        ensure_chromium()
    return subprocess.call([str(PY), "-m", "pytest", *args], cwd=ROOT)


def demo_logins() -> dict[str, str]:
    """Random passwords made once per checkout (kept in var/, never committed)."""
    path = ROOT / "var" / "demo_logins.json"
    path.parent.mkdir(exist_ok=True)
    logins = json.loads(path.read_text()) if path.exists() else {}
    missing = [name for name in DEMO_USERS if name not in logins]
    if missing:
        logins.update({name: secrets.token_urlsafe(9) for name in missing})
        path.write_text(json.dumps(logins))
        path.chmod(0o600)
    return logins


# Two reviewers, so double review (a share of items judged by a second,
# blind reviewer) can be tried from two browsers; one operator.
DEMO_USERS = ("reviewer", "reviewer2", "operator")


# The demo's load comes in waves: a round of the built-in suite every
# DEMO_ROUND_SECONDS for DEMO_BUSY_MINUTES, then DEMO_QUIET_MINUTES with none,
# and again. One reviewer at about two decisions a minute sees draft mode
# arrive after ~5 minutes and recede after ~20, losing nothing: checked with
# `python -m simulation demo-load`, whose defaults these are.
DEMO_LOAD_DEFAULTS = {
    "DEMO_ROUND_SECONDS": 60.0,
    "DEMO_BUSY_MINUTES": 7.0,
    "DEMO_QUIET_MINUTES": 23.0,
    "DEMO_BATCH": 1.0,
}


def demo_load() -> dict[str, float]:
    """The load knobs, from the environment or the defaults above."""
    load = {}
    for name, default in DEMO_LOAD_DEFAULTS.items():
        try:
            load[name] = float(os.environ.get(name, default))
        except ValueError:
            sys.exit(f"{name} must be a number, not {os.environ[name]!r}")
        if load[name] < 0 or (name in ("DEMO_ROUND_SECONDS", "DEMO_BATCH") and load[name] <= 0):
            sys.exit(f"{name} must be positive")
    return load


class Waves:
    """Submits rounds of the suite in waves, one short-lived `submit_suite` per round."""

    def __init__(
        self, load: dict[str, float], manage: list[str], env: dict[str, str], log: IO[bytes] | None = None
    ) -> None:
        self.round_s = load["DEMO_ROUND_SECONDS"]
        self.busy_s = load["DEMO_BUSY_MINUTES"] * 60
        self.cycle_s = self.busy_s + load["DEMO_QUIET_MINUTES"] * 60
        self.batch = str(int(load["DEMO_BATCH"]))
        self.manage, self.env, self.log = manage, env, log
        self.start = time.monotonic()
        self.sent: set[tuple[int, int]] = set()
        self.running: list[subprocess.Popen] = []

    def tick(self) -> None:
        self.running = [p for p in self.running if p.poll() is None]
        cycle, offset = divmod(time.monotonic() - self.start, self.cycle_s or 1)
        key = (int(cycle), int(offset // self.round_s))
        if offset < self.busy_s and key not in self.sent:
            self.sent.add(key)
            command = [*self.manage, "submit_suite", "--repeat", "1", "--batch", self.batch]
            out = self.log or subprocess.DEVNULL
            self.running.append(subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=out, stderr=out))

    def stop(self) -> None:
        for p in self.running:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def demo_accounts(manage: list[str], env: dict[str, str], log: IO[bytes] | None = None) -> dict[str, str]:
    """Migrate, and make the demo's reviewer and operator with this checkout's passwords."""
    sh(*manage, "migrate", "--no-input", "-v", "0", env=env, log=log)
    logins = demo_logins()
    for name in ("reviewer", "reviewer2"):
        role = ["--user", name, "--role", "reviewer", "--password", logins[name]]
        sh(*manage, "setup_roles", *role, env=env, log=log)
    operator = ["--user", "operator", "--role", "operator", "--password", logins["operator"], "--staff"]
    sh(*manage, "setup_roles", *operator, env=env, log=log)
    # A second queue, so the queue switcher and the operators' overview have
    # something to show: the suite's open tasks (no checks at all) go there.
    docs = ["docs", "--name", "Open tasks", "--capacity", "20", "--open-to-all", "--exist-ok"]
    sh(*manage, "queue", "create", *docs, env=env, log=log)
    sh(*manage, "queue", "route", "docs", "--task-kind", "open", "--exist-ok", env=env, log=log)
    return logins


def demo_processes(manage: list[str], env: dict[str, str], port: int, log: IO[bytes]) -> list[subprocess.Popen]:
    """A Celery worker with beat, and the web server, both writing to ``log``."""
    schedule = str(ROOT / "var" / "celerybeat-schedule")
    worker = [str(PY), "-m", "celery", "-A", "reviewqueue.celery", "worker", "-B", "--concurrency=2"]
    server = [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"]
    return [
        subprocess.Popen([*worker, "--loglevel=WARNING", "-s", schedule], cwd=ROOT, env=env, stdout=log, stderr=log),
        subprocess.Popen(server, cwd=ROOT, env=env, stdout=log, stderr=log),
    ]


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """Ctrl-C each, then wait; whatever is still running after 15 s is killed.
    A second Ctrl-C meanwhile (a terminal sends one to the whole process
    group) is ignored rather than left to interrupt the wait."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("stopping the worker and the server (at most 15 s)...", flush=True)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


def demo_log_path() -> Path:
    """Where the demo's processes write: the terminal keeps only the banner."""
    return ROOT / "var" / "demo.log"


def demo_banner(port: int, logins: dict[str, str], load: dict[str, float]) -> str:
    log = demo_log_path().relative_to(ROOT)
    return (
        "\n"
        "  reviewqueue demo is running\n"
        f"  open       http://127.0.0.1:{port}/\n"
        f"  reviewer   reviewer / {logins['reviewer']}   (review page: keys n a r 1-5 Enter e b s u q ?)\n"
        f"             reviewer2 / {logins['reviewer2']}   (a second reviewer, for double review)\n"
        f"  operator   operator / {logins['operator']}   (dashboard, items, review quality, what-if, policy, admin; reviews too)\n"
        f"  load       a round of the suite every {load['DEMO_ROUND_SECONDS']:g} s for "
        f"{load['DEMO_BUSY_MINUTES']:g} min, then {load['DEMO_QUIET_MINUTES']:g} min quiet (DEMO_* variables)\n"
        f"  logs       {log}   (tail -f {log}: the web server's, the worker's and the loops')\n"
        "  loops of the built-in suite are filling the queue; Ctrl-C stops everything\n"
    )


def status_line(started: float, rounds: int) -> str:
    """The one line under the banner that changes, rewritten in place."""
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    return f"\r  up {minutes:d} min {seconds:02d} s, {rounds} round{'s' if rounds != 1 else ''} of the suite sent "


def demo(port: int = 8000) -> int:
    """Start the demo; its processes log to var/demo.log, so the terminal
    shows the banner with the logins and one status line, nothing else."""
    load = demo_load()
    ensure_venv()
    ensure_bubblewrap()
    env = redline_env({**os.environ, "DEBUG": os.environ.get("DEBUG", "1"), "PYTHONUNBUFFERED": "1"})
    manage = [str(PY), "manage.py"]
    demo_log_path().parent.mkdir(exist_ok=True)
    with demo_log_path().open("ab") as log:
        logins = demo_accounts(manage, env, log)
        procs = demo_processes(manage, env, port, log)
        waves = Waves(load, manage, env, log)
        time.sleep(3)
        print(demo_banner(port, logins, load), flush=True)
        return run_demo(procs, waves)


def run_demo(procs: list[subprocess.Popen], waves: Waves) -> int:
    """Submit the waves until Ctrl-C or a process stops, then stop them all."""
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` or a supervisor stops it like Ctrl-C
    started, live = time.monotonic(), sys.stdout.isatty()
    try:
        while all(p.poll() is None for p in procs):
            waves.tick()
            if live:
                print(status_line(started, len(waves.sent)), end="", flush=True)
            time.sleep(1)
        print(f"\n  a demo process stopped; see {demo_log_path().relative_to(ROOT)}", flush=True)
    except KeyboardInterrupt:
        print(flush=True)
    finally:
        waves.stop()
        stop_processes(procs)
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "setup"}:
        print(__doc__)
        return 2
    if argv[0] == "demo":
        return demo(int(os.environ.get("PORT", "8000")))
    if argv[0] == "setup":
        ensure_venv()
        ensure_bubblewrap()
        return 0
    return test(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
