"""The red line's sandbox: bubblewrap around every process that runs a
candidate or a check.

Each process gets new user, pid, net, ipc, uts and cgroup namespaces (no
network at all, not even a loopback that is up), an unprivileged uid, a
read-only view of the Python runtime and nothing else from the host, a
private tmpfs as its working folder, an empty environment (bubblewrap itself
is started from one, so ``/proc/1/environ`` inside is empty too), no
capabilities, and rlimits on CPU, memory, file size, open files and
processes. When the worker runs as root it drops to ``REDLINE_SANDBOX_UID``
(default 65534) before starting bubblewrap, because the kernel does not
enforce the process limit for a real uid of 0.

``REDLINE_SANDBOX``: unset or ``bwrap`` sandboxes (the default; if
bubblewrap cannot run, red lines fail closed with SandboxUnavailable);
``none`` runs the same two-process protocol in plain child processes with
rlimits and no namespaces, for machines without bubblewrap. ``none`` only
keeps a candidate from faking a pass; it does not keep it from the worker's
files, network or other processes.
"""

from __future__ import annotations

import fcntl
import logging
import marshal
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

MODE_ENV = "REDLINE_SANDBOX"
PYTHON_ENV = "REDLINE_PYTHON"
UID_ENV = "REDLINE_SANDBOX_UID"
BWRAP_ENV = "REDLINE_BWRAP"
DEFAULT_BWRAP = "/usr/bin/bwrap"
DEFAULT_UID = 65534  # nobody: whom a root worker runs sandboxes as
INSIDE_UID = 65534  # whom every sandboxed process is, inside its user namespace
FALLBACK_PYTHON = "/usr/bin/python3"
# The protocol's two pipes sit at these fds in both processes (loops.harness).
WIRE_FDS = (3, 4)
HARNESS_SOURCE = (Path(__file__).with_name("harness.py")).read_text(encoding="utf-8")


def _role_sources() -> dict[str, str]:
    """Each role gets the shared wire code and its own side only: less to
    compile at every start."""
    common, _, rest = HARNESS_SOURCE.partition("# -- the candidate's side")
    candidate, _, rest = rest.partition("# -- the checks' side")
    checks, _, _ = rest.partition("def main(role):")
    # Each marker's line goes on with dashes: drop the rest of that line.
    candidate, checks = candidate.partition("\n")[2], checks.partition("\n")[2]
    return {"candidate": common + candidate + "\ncandidate_main()\n", "checks": common + checks + "\nchecks_main()\n"}


ROLE_SOURCES = _role_sources()


class SandboxUnavailable(RuntimeError):
    """The red line cannot be sandboxed here, so it refuses to run hidden
    checks; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """rlimits for one sandboxed process (and everything it starts)."""

    cpu_s: int
    memory_bytes: int
    file_bytes: int = 1024 * 1024
    open_files: int = 64
    processes: int = 64


@dataclass(frozen=True)
class Status:
    """Whether red lines run sandboxed in this process, and if not, why."""

    sandboxed: bool
    mode: str  # "bwrap" or "none"
    reason: str = ""


def mode() -> str:
    """The configured mode; an unknown value is refused rather than guessed."""
    value = os.environ.get(MODE_ENV, "").strip().lower() or "bwrap"
    if value not in {"bwrap", "none"}:
        raise SandboxUnavailable(f"{MODE_ENV} must be 'bwrap' or 'none', not {value!r}")
    return value


def status() -> Status:
    """What the dashboard and the API show. Safe to call often: the probe
    runs once per process."""
    try:
        current = mode()
        uid = _sandbox_uid()
    except SandboxUnavailable as exc:
        return Status(False, "bwrap", str(exc))
    if current == "none":
        return Status(False, "none", f"{MODE_ENV}=none: candidates and checks run without a sandbox")
    reason = _probe(_bwrap_path(), uid, _python())
    return Status(reason is None, "bwrap", reason or "")


def require() -> bool:
    """True to sandbox, False for the explicit ``none`` mode (logged once);
    SandboxUnavailable when bubblewrap is wanted but cannot run."""
    current = status()
    if current.sandboxed:
        return True
    if current.mode == "none":
        _warn_unsandboxed()
        return False
    raise SandboxUnavailable(
        f"the red line is not sandboxed, so hidden checks are refused: {current.reason}. "
        f"Install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces, "
        f"or set {MODE_ENV}=none to run only trusted tasks without a sandbox."
    )


@cache
def _warn_unsandboxed() -> None:
    log.warning("%s=none: red-line candidates and checks run without a sandbox (trusted tasks only)", MODE_ENV)


def _bwrap_path() -> str:
    return os.environ.get(BWRAP_ENV) or DEFAULT_BWRAP


def _sandbox_uid() -> int | None:
    """The uid to drop to before bubblewrap, or None when already unprivileged."""
    if os.geteuid() != 0:
        return None
    value = os.environ.get(UID_ENV) or str(DEFAULT_UID)
    # uid 0 would lift the process limit (the kernel does not enforce it for root).
    if not value.isdigit() or int(value) == 0:
        raise SandboxUnavailable(f"{UID_ENV} must be an unprivileged uid, not {value!r}")
    return int(value)


def _python() -> str:
    """The interpreter inside the sandbox: ``REDLINE_PYTHON``, else this
    process's base interpreter if the sandbox's uid can read it, else
    Debian's. The harness needs only the standard library."""
    chosen = os.environ.get(PYTHON_ENV)
    if chosen:
        return chosen
    base = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    if _world_readable(base) if os.geteuid() == 0 else os.access(base, os.X_OK):
        return base
    return FALLBACK_PYTHON


def _world_readable(path: str) -> bool:
    """Every directory on the way is searchable and the file readable and
    executable by others: what an unrelated uid needs."""
    try:
        current = Path(path)
        mode_bits = current.stat().st_mode
        if not (mode_bits & stat.S_IROTH and mode_bits & stat.S_IXOTH):
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in current.parents)
    except OSError:
        return False


def _runtime_binds(python: str) -> list[str]:
    """Read-only binds of only the runtime: /usr, the merged-/usr links, and
    the interpreter's prefix when it lives elsewhere."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "lib32", "sbin"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    prefix = str(Path(os.path.realpath(python)).parent.parent)
    if not prefix.startswith("/usr/") and prefix != "/usr" and prefix != "/":
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_command(bwrap: str, python: str, argv: list[str]) -> list[str]:
    """The whole bubblewrap command line for one sandboxed process. Inside,
    the process is always uid and gid 65534, whatever it is outside."""
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_UID),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        *_runtime_binds(python),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--chdir",
        "/tmp",
        "--clearenv",
        "--",
        python,
        *argv,
    ]


def _apply_limits(limits: Limits | None, wire: tuple[int, int] | None, nproc: int | None) -> Callable[[], None]:
    """The child's last steps before exec: the protocol pipes moved to fds 3
    and 4, then the rlimits (after the uid drop, which Popen does first)."""

    def apply() -> None:
        if wire is not None:
            # Via high fds first, so moving one pipe cannot clobber the other.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in wire]
            for target, fd in zip(WIRE_FDS, high, strict=True):
                os.dup2(fd, target)
                os.close(fd)
        if limits is None:
            return
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return apply


_owned: dict[int, tuple[float, int]] = {}  # uid -> (when counted, processes it owned)


def _process_limit(limits: Limits | None, uid: int | None) -> int | None:
    """RLIMIT_NPROC for a sandbox: its own share on top of the processes the
    real uid already owns. The kernel counts the limit against every process
    of that uid on the machine (other sandboxes running at the same time, or
    the worker's own processes when it is not root), so a bare 64 would let
    concurrent runs starve each other. Counted afresh for each run (the two
    sandboxes of one run share the count)."""
    if limits is None:
        return None
    owner = uid if uid is not None else os.getuid()
    counted = _owned.get(owner)
    if counted is None or time.monotonic() - counted[0] > 0.5:
        owned = 0
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    owned += entry.stat().st_uid == owner
                except OSError:
                    pass
        counted = (time.monotonic(), owned)
        _owned[owner] = counted
    return counted[1] + limits.processes


def spawn(
    argv: list[str],
    *,
    sandboxed: bool,
    limits: Limits | None,
    wire: tuple[int, int] | None = None,
    stdout: bool = False,
    cwd: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``python -I -S <argv>`` sandboxed (or plain, for ``none``) with
    the pipes in ``wire`` at fds 3 and 4, stdin a pipe, stdout a pipe when
    asked, stderr discarded (it may echo a check). The process is the leader
    of a new session, so :func:`kill` reaches all it started outside the
    sandbox; inside, the pid namespace dies with it."""
    uid = _sandbox_uid() if sandboxed else None
    if sandboxed:
        command = bwrap_command(_bwrap_path(), _python(), argv)
    else:
        command = [sys.executable, *argv]
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={},
        cwd=cwd,
        pass_fds=WIRE_FDS if wire is not None else (),
        preexec_fn=_apply_limits(limits, wire, _process_limit(limits, uid) if sandboxed else None),  # noqa: PLW1509 - rlimits need it
        start_new_session=True,
        user=uid,
        group=uid,
        extra_groups=[] if uid is not None else None,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group and reap it; the pid namespace dies with
    bubblewrap. Safe to repeat."""
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


# The harness compiled once here and sent ahead of the process's input:
# compiling it in every sandbox cost each run about 4 ms.
BOOTSTRAP = "import marshal,sys;exec(marshal.loads(sys.stdin.buffer.read(int(sys.argv[1]))))"
ROLE_CODE = {
    role: marshal.dumps(compile(source, f"<red line: {role}>", "exec")) for role, source in ROLE_SOURCES.items()
}


def harness(role: str, *, sandboxed: bool) -> tuple[list[str], bytes]:
    """The interpreter's arguments for one side of the harness, and what to
    write to its stdin before that side's own input. ``-I -S``: no site, no
    user paths, nothing from the environment; no project file is visible
    inside, so the harness comes inline: compiled here when the interpreter
    inside reads this one's bytecode (same Python minor version), else as
    source."""
    if not sandboxed or _reads_our_bytecode(_bwrap_path(), _sandbox_uid(), _python()):
        code = ROLE_CODE[role]
        return ["-I", "-S", "-c", BOOTSTRAP, str(len(code))], code
    return ["-I", "-S", "-c", ROLE_SOURCES[role]], b""


_probe_lock = threading.Lock()
# (configuration) -> (when probed, None or why bubblewrap cannot run)
_probed: dict[tuple[str, int | None, str], tuple[float, str | None]] = {}
# A failed probe is asked again after this long: a transient failure (another
# sandbox's fork bomb holding the shared uid's process limit) must not turn
# the red line off for the life of the worker. Success is kept for good.
PROBE_RETRY_S = 30.0


def _probe(bwrap: str, uid: int | None, python: str) -> str | None:
    """None when bubblewrap starts the sandbox's Python here, else why not.
    Runs once per process and configuration (a failure again after
    PROBE_RETRY_S)."""
    key = (bwrap, uid, python)
    with _probe_lock:
        known = _probed.get(key)
        if known is None or (known[1] is not None and time.monotonic() - known[0] > PROBE_RETRY_S):
            known = (time.monotonic(), _run_probe(bwrap, uid, python))
            _probed[key] = known
        return known[1]


def _run_probe(bwrap: str, uid: int | None, python: str) -> str | None:
    if not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)) and not shutil.which(bwrap):
        return f"bubblewrap is not installed ({bwrap} not found)"
    try:
        done = _run_once(bwrap, uid, python, ["-I", "-S", "-c", "print('ok')"])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap did not start: {exc}"
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap could not start the sandbox ({detail[-1] if detail else f'exit {done.returncode}'})"
    return None


def _run_once(
    bwrap: str, uid: int | None, python: str, argv: list[str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """One short sandboxed run for a probe: empty environment, dropped uid."""
    return subprocess.run(
        bwrap_command(bwrap, python, argv),
        input=stdin,
        env={},
        capture_output=True,
        timeout=30,
        check=False,
        user=uid,
        group=uid,
        extra_groups=[] if uid is not None else None,
    )


_bytecode_ok: dict[tuple[str, int | None, str], bool] = {}


def _reads_our_bytecode(bwrap: str, uid: int | None, python: str) -> bool:
    """Whether the sandbox's interpreter runs code marshalled here (marshal's
    format is fixed within a Python minor version). Asked once per process
    and configuration, by running it."""
    key = (bwrap, uid, python)
    with _probe_lock:
        if key not in _bytecode_ok:
            code = marshal.dumps(compile("print('ok')", "<probe>", "exec"))
            try:
                done = _run_once(bwrap, uid, python, ["-I", "-S", "-c", BOOTSTRAP, str(len(code))], code)
                _bytecode_ok[key] = done.returncode == 0 and done.stdout.strip() == b"ok"
            except (OSError, subprocess.SubprocessError):
                _bytecode_ok[key] = False
        return _bytecode_ok[key]


def reset_probe() -> None:
    """Forget the probe's answer (tests change the configuration)."""
    with _probe_lock:
        _probed.clear()
        _bytecode_ok.clear()
