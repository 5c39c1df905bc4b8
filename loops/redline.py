"""Red lines: the demand red line (hidden checks, sandboxed and
call-by-value) and the format red line (parses, JSON schema).

A demand red line runs two processes, each in its own bubblewrap sandbox
(``loops.sandbox``): one runs the candidate, the other runs the checks. They
talk over two pipes in plain data only (``loops.harness``): a check calling
``is_even(2)`` sends ``2`` and gets back a real ``bool``, never an object the
candidate made. The verdict leaves only the checks' process, on a pipe the
candidate has no handle on, and is validated here: one result per check, ids
in order, nothing else, or the run fails. Whatever the candidate does to its
own process (exit early, patch modules, rewrite frames, write to any fd) can
only make it fail.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import selectors
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from loops import harness, sandbox
from loops.harness import MAX_LOG, MAX_MESSAGE, exception_name
from loops.sandbox import SandboxUnavailable
from loops.spec import Check, Task

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_BYTES = 512 * 1024 * 1024
_MAX_VERDICT_BYTES = 1024 * 1024
_LOG_TAIL_LINES = 20

_FENCE = re.compile(r"```[ \t]*(?:python|py|json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RedLineResult",
    "SandboxUnavailable",
    "demand_red_line",
    "extract_code",
    "format_problem",
    "run_checks",
]


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


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


def run_checks(
    candidate: str,
    checks: Sequence[Check],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> RedLineResult:
    """Run the hidden ``checks`` against ``candidate``: the candidate in one
    sandbox, the checks in another. Safe to repeat; holds no state. Raises
    SandboxUnavailable when bubblewrap is wanted but cannot run."""
    if not checks:
        return RedLineResult(passed=True)
    sandboxed = sandbox.require()
    limits = sandbox.Limits(cpu_s=math.ceil(timeout_s) + 1, memory_bytes=memory_bytes)
    if sandboxed:  # inside, the working folder is the sandbox's private /tmp
        return _run(candidate, checks, sandboxed, limits, timeout_s, None)
    # Without the sandbox, the processes still get an empty folder of their own.
    with tempfile.TemporaryDirectory(prefix="redline-") as workdir:
        return _run(candidate, checks, sandboxed, limits, timeout_s, workdir)


def _run(
    candidate: str,
    checks: Sequence[Check],
    sandboxed: bool,
    limits: sandbox.Limits,
    timeout_s: float,
    workdir: str | None,
) -> RedLineResult:
    """One run: start both processes, feed them, read the verdict, kill both."""
    deadline = time.monotonic() + timeout_s
    candidate_argv, candidate_prefix = sandbox.harness("candidate", sandboxed=sandboxed)
    checks_argv, checks_prefix = sandbox.harness("checks", sandboxed=sandboxed)
    payload = checks_prefix + harness.encode([(c.id, c.code, c.stdin, c.stdout) for c in checks])
    procs = _spawn_pair(candidate_argv, checks_argv, sandboxed, limits, workdir)
    if procs is None:
        return RedLineResult(passed=False, failure_class="HarnessError")
    candidate_proc, checks_proc = procs
    feeders: list[threading.Thread] = []
    try:
        feeders += [
            _feed(candidate_proc, candidate_prefix + candidate.encode("utf-8", "surrogatepass")),
            _feed(checks_proc, payload),
        ]
        raw = _read_verdict(checks_proc, deadline)
    finally:
        for proc in procs:
            sandbox.kill(proc)
        for feeder in feeders:
            feeder.join()
    if raw is None:
        return RedLineResult(passed=False, failure_class="Timeout")
    return _verdict(raw, checks, checks_proc.returncode)


def _spawn_pair(
    candidate_argv: list[str],
    checks_argv: list[str],
    sandboxed: bool,
    limits: sandbox.Limits,
    workdir: str | None,
) -> list[subprocess.Popen[bytes]] | None:
    """Start the candidate's and the checks' processes, joined by two pipes;
    None when a process could not start (the other is killed)."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # Both sandboxes start at once; each holds only its own pipe ends.
        procs.append(
            sandbox.spawn(
                candidate_argv,
                sandboxed=sandboxed,
                limits=limits,
                wire=(request_r, reply_w),
                cwd=workdir,
            )
        )
        procs.append(
            sandbox.spawn(
                checks_argv,
                sandboxed=sandboxed,
                limits=limits,
                wire=(request_w, reply_r),
                stdout=True,
                cwd=workdir,
            )
        )
    except OSError:
        # No process to start (the sandbox uid's process limit, shared with
        # every sandbox on the host, is spent): this attempt fails, never passes.
        for proc in procs:
            sandbox.kill(proc)
        return None
    except BaseException:
        for proc in procs:
            sandbox.kill(proc)
        raise
    finally:
        for fd in (request_r, request_w, reply_r, reply_w):
            os.close(fd)
    return procs


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> threading.Thread:
    """Write ``data`` to the process's stdin and close it, in a thread, so a
    process that never reads cannot block the worker past the deadline."""

    def write() -> None:
        stdin = proc.stdin
        if stdin is None:
            return
        try:
            stdin.write(data)
            stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _read_verdict(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
    """The checks' process's stdout up to EOF, or None at the deadline. More
    than the cap is cut, which then fails validation."""
    assert proc.stdout is not None  # spawned with stdout=True
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > _MAX_VERDICT_BYTES:
                return b""
            chunks.append(chunk)


def _verdict(raw: bytes, checks: Sequence[Check], returncode: int | None) -> RedLineResult:
    """The verdict the checks' process wrote, validated strictly: one frame,
    exactly one result per check, ids in task order, nothing else. Anything
    else fails the whole run, never passes it."""
    results: list[Any] = []
    log_text = ""
    try:
        size = int.from_bytes(raw[:4], "big")
        tag, results, log_text = harness.decode(raw[4:]) if size == len(raw) - 4 else (None, None, None)
        valid = (
            tag == "verdict"
            and type(results) is list
            and type(log_text) is str
            and len(results) == len(checks)
            and all(
                type(r) is tuple
                and len(r) == 3
                and r[0] == check.id
                and (r[1] is None or type(r[1]) is str)
                and type(r[2]) is str
                for r, check in zip(results, checks, strict=True)
            )
        )
    except (harness.ProtocolError, TypeError, ValueError):
        valid = False
    if not valid:
        # Killed by a limit before it could answer, or an answer off the format.
        cls = "ResourceLimit" if returncode is not None and returncode < 0 else "HarnessError"
        return RedLineResult(passed=False, failure_class=cls)
    log_tail = _tail(log_text[-MAX_LOG:])
    failed = [r for r in results if r[1] is not None]
    if not failed:
        return RedLineResult(passed=True, log_tail=log_tail)
    return RedLineResult(
        passed=False,
        failure_class=exception_name(failed[0][1]),
        failed_checks=tuple(r[0] for r in failed),
        messages=tuple(r[2][:MAX_MESSAGE] for r in failed if r[2]),
        log_tail=log_tail,
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
