"""The red line's harness before the sandbox: candidate and checks in one
``python -I -S`` process, verdict on its stdout after a nonce. Kept only as
the baseline the attack tests and bench/bench_redline.py compare against: every
attack in tests/loops/test_redline_attacks.py passes here. Never used in
production.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from loops.redline import DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT_S, RedLineResult
from loops.spec import Check

_MAX_OUTPUT_BYTES = 1024 * 1024
_LOG_TAIL_LINES = 20


# The harness runs inside the child. It reports each check as an error class
# and an id only: assertion messages are discarded here, at the source.
_HARNESS = r"""
import contextlib, io, json, sys


def main():
    # Everything lives in locals so a candidate does not find the checks as
    # module globals; a determined one still could (isolation, not security).
    data = json.loads(sys.stdin.read())
    real_stdout = sys.stdout
    log = io.StringIO()
    results = []

    def run(source, name, stdin_text):
        namespace = {"__name__": name}
        buffer = io.StringIO()
        sys.stdin = io.StringIO(stdin_text)
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(log):
            exec(compile(source, "candidate.py", "exec"), namespace)
        return namespace, buffer.getvalue()

    for check in data["checks"]:
        error, message = None, ""
        try:
            if check.get("code") is not None:
                with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                    namespace, _ = run(data["candidate"], "candidate", "")
                    exec(compile(check["code"], "<check>", "exec"), namespace)
            else:
                # Printed output of input/output cases stays out of the log:
                # it would echo the hidden expected output back as a hint.
                _, printed = run(data["candidate"], "__main__", check.get("stdin") or "")
                if printed.rstrip().splitlines() != check["stdout"].rstrip().splitlines():
                    error = "AssertionError"
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = "SystemExit"
        except BaseException as exc:
            error = type(exc).__name__
            if not isinstance(exc, AssertionError):
                message = str(exc)[:200]
        results.append({"id": check["id"], "error": error, "message": message})
    report = json.dumps({"results": results, "log": log.getvalue()[-4000:]})
    real_stdout.write(data["nonce"] + report)


main()
"""


def _limits(cpu_s: int, memory_bytes: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (_MAX_OUTPUT_BYTES, _MAX_OUTPUT_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


def run_checks(
    candidate: str,
    checks: Sequence[Check],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> RedLineResult:
    """Run ``candidate`` against the hidden ``checks`` in a child process."""
    nonce = secrets.token_hex(16)
    payload = json.dumps(
        {
            "candidate": candidate,
            "checks": [c.to_dict() for c in checks],
            "nonce": nonce,
        }
    )
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
    with tempfile.TemporaryDirectory(prefix="redline-") as workdir:
        harness = os.path.join(workdir, "harness.py")
        with open(harness, "w", encoding="utf-8") as handle:
            handle.write(_HARNESS)
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", harness],
                input=payload,
                capture_output=True,
                text=True,
                cwd=workdir,
                env=env,
                timeout=timeout_s,
                preexec_fn=_limits(math.ceil(timeout_s) + 1, memory_bytes),
                start_new_session=True,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return RedLineResult(passed=False, failure_class="Timeout")
    _, found, report = done.stdout.rpartition(nonce)
    if not found:
        # Killed by a limit, or the candidate ended the process itself.
        cls = "ResourceLimit" if done.returncode < 0 else "HarnessError"
        return RedLineResult(passed=False, failure_class=cls, log_tail=_tail(done.stderr))
    data = json.loads(report)
    failed = [r for r in data["results"] if r["error"]]
    if not failed:
        return RedLineResult(passed=True, log_tail=_tail(data["log"]))
    return RedLineResult(
        passed=False,
        failure_class=failed[0]["error"],
        failed_checks=tuple(r["id"] for r in failed),
        messages=tuple(r["message"] for r in failed if r["message"]),
        log_tail=_tail(data["log"]),
    )
