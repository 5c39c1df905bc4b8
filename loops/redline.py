"""Red lines: the demand red line (hidden checks in a subprocess) and the
format red line (parses, JSON schema).

Isolation, not a security sandbox: the candidate runs in a separate Python
process, in an empty temporary directory, with a timeout, CPU and memory
limits and an environment holding only PATH and LANG. That keeps a buggy or
runaway candidate from hurting the worker or reading its secrets by accident.
It does not stop hostile code: the process can still use the network, read
files the worker's user can read, and inspect the harness that runs it. Run
workers as an unprivileged user in a container when candidates are untrusted.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jsonschema

from loops.tasks import Check, Task

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_BYTES = 512 * 1024 * 1024
_MAX_OUTPUT_BYTES = 1024 * 1024
_LOG_TAIL_LINES = 20

_FENCE = re.compile(r"```[ \t]*(?:python|py|json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str:
    """The first fenced block of an answer, or the whole answer when unfenced."""
    match = _FENCE.search(text)
    return match.group(1) if match else text


@dataclass(frozen=True)
class RedLineResult:
    """The verdict of a red line. ``signature`` is ``ErrorClass:check_id`` of
    the first failing check; no field ever holds assertion text, and
    ``messages``/``log_tail`` are what the candidate itself raised or printed
    (hint builders still redact them)."""

    passed: bool
    failure_class: str = ""
    failed_checks: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    log_tail: str = ""

    @property
    def signature(self) -> str:
        if self.passed:
            return ""
        first = self.failed_checks[0] if self.failed_checks else "run"
        return f"{self.failure_class}:{first}"


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


def format_problem(task: Task, output: str) -> str | None:
    """The format red line: None when ``output`` has the task's format, else
    a short reason. A cheap pre-gate, never a stop signal by itself."""
    if task.format_check is None:
        return None
    body = extract_code(output)
    if task.format_check == "python":
        try:
            ast.parse(body)
        except SyntaxError as exc:
            return f"not valid Python (line {exc.lineno})"
        except ValueError:
            return "not valid Python"
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return "not valid JSON"
    if task.format_check == "json_schema" and task.format_schema:
        try:
            jsonschema.validate(value, dict(task.format_schema))
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "top level"
            return f"JSON does not match the schema at {where} ({exc.validator})"
    return None


def demand_red_line(task: Task, output: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> RedLineResult:
    """The task's hidden checks against the code in ``output``."""
    return run_checks(extract_code(output), task.checks, timeout_s=timeout_s)
