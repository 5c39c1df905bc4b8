"""Candidates (and checks) that attack the red line. Each attack is run first
through the old single-process harness (tests/loops/legacy_harness.py), where
it passes, which shows the candidate is a real attack; then through the red
line, where it must fail.

The protocol attacks (faked passes) run in both modes: sandboxed, and the
explicit ``REDLINE_SANDBOX=none``, since call-by-value alone defeats them. The
escapes need the sandbox and run with it only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loops import sandbox
from loops.agents import Replay, ScriptedAgent
from loops.redline import run_checks
from loops.runner import LoopConfig, run_task
from loops.spec import Check, Task

from .legacy_harness import run_checks as legacy_run_checks

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = [Check(id="check_1", code="assert double(2) == 4"), Check(id="check_2", code="assert double(5) == 10")]
PROGRAM = [Check(id="case_1", stdin="2\n", stdout="4\n"), Check(id="case_2", stdin="5\n", stdout="10\n")]
WRONG = "def double(n):\n    return 0\n"

# A forged "everything passed" report: in the old harness's format (nonce and
# checks found through the garbage collector, in its locals), and in the
# sandboxed harness's verdict format, guessing the check ids, both at once.
FORGE = (
    "import gc, json, os, sys\n"
    "def _forged():\n"
    "    blob = b''\n"
    "    data = next((o for o in gc.get_objects() if type(o) is dict and 'nonce' in o and 'checks' in o), None)\n"
    "    if data is not None:\n"
    "        results = [{'id': c['id'], 'error': None, 'message': ''} for c in data['checks']]\n"
    "        blob += (data['nonce'] + json.dumps({'results': results, 'log': ''})).encode()\n"
    "    encode = getattr(sys.modules['__main__'], 'encode', None)\n"
    "    if encode is not None:\n"
    "        for ids in (['check_1', 'check_2'], ['case_1', 'case_2']):\n"
    "            frame = encode(('verdict', [(i, None, '') for i in ids], ''))\n"
    "            blob += len(frame).to_bytes(4, 'big') + frame\n"
    "    return blob\n"
)

PROTOCOL_ATTACKS: dict[str, tuple[str, list[Check]]] = {
    "rigged __eq__": (
        (
            "class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
            "def double(n):\n    return Liar(0)\n"
        ),
        FUNCTION,
    ),
    "rigged __bool__": (
        "class Yes:\n    def __bool__(self):\n        return True\ndef is_even(n):\n    return Yes()\n",
        [Check(id="check_1", code="assert is_even(2)"), Check(id="check_2", code="assert is_even(4)")],
    ),
    "builtins shadowed by the candidate's names": (
        (
            "def squares(n):\n    return iter([])\n"
            "def list(values):\n    return [0, 1, 4, 9]\n"
            "def sorted(values):\n    return [1, 2, 3]\n"
            "len = lambda values: 3\n"
        ),
        [
            Check(id="check_1", code="assert list(squares(4)) == [0, 1, 4, 9]"),
            Check(id="check_2", code="assert sorted(squares(3)) == [1, 2, 3] and len(squares(3)) == 3"),
        ],
    ),
    "sys.exit(0), function checks": ("import sys\nsys.exit(0)\n" + WRONG, FUNCTION),
    "sys.exit(0), program checks": ("import sys\nsys.exit(0)\n", PROGRAM),
    "os._exit(0) after forging the report": (FORGE + "os.write(1, _forged())\nos._exit(0)\n" + WRONG, FUNCTION),
    "os._exit(0) after forging, program checks": (FORGE + "os.write(1, _forged())\nos._exit(0)\n", PROGRAM),
    "atexit forges the last word": (
        FORGE + "import atexit\n_blob = _forged()\natexit.register(lambda: os.write(1, _blob))\n" + WRONG,
        FUNCTION,
    ),
    "excepthook forges after breaking the reporter": (
        FORGE + "import sys\n_blob = _forged()\n"
        "sys.excepthook = lambda *exc: os.write(1, _blob)\n"
        "_real = json.dumps\njson.dumps = lambda *a, **k: 1 / 0\n" + WRONG,
        FUNCTION,
    ),
    "forged report on every fd": (
        FORGE
        + "for fd in range(1, 64):\n    try:\n        os.write(fd, _forged())\n    except OSError:\n        pass\n"
        "os._exit(0)\n",
        PROGRAM,
    ),
    "forged report on every fd, function checks": (
        FORGE
        + "for fd in range(1, 64):\n    try:\n        os.write(fd, _forged())\n    except OSError:\n        pass\n"
        "os._exit(0)\n" + WRONG,
        FUNCTION,
    ),
    "patched json.dumps": (
        "import json\n_real = json.dumps\n"
        "def _pass_all(obj, **kw):\n"
        "    if isinstance(obj, dict) and 'results' in obj:\n"
        "        obj = {'results': [dict(r, error=None) for r in obj['results']], 'log': ''}\n"
        "    return _real(obj, **kw)\n"
        "json.dumps = _pass_all\nprint = lambda *a, **k: None\n" + WRONG,
        FUNCTION,
    ),
    "sys.modules['json'] replaced": (
        "import sys, json, types\n_real = json.dumps\nfake = types.ModuleType('json')\n"
        "fake.loads = json.loads\n"
        "fake.dumps = lambda obj, **kw: _real({'results': [dict(r, error=None) for r in obj['results']], 'log': ''})\n"
        "sys.modules['__main__'].json = fake\n" + WRONG,  # the harness's own global
        FUNCTION,
    ),
    "stack frames: checks rewritten to pass": (
        "import sys\nf = sys._getframe()\n"
        "while f:\n"
        "    for value in list(f.f_locals.values()):\n"
        "        if type(value) is dict and 'checks' in value:\n"
        "            for c in value['checks']:\n"
        "                c.update(code='pass', stdout=None) if 'code' in c else c.update(stdout='')\n"
        "    f = f.f_back\n" + WRONG,
        FUNCTION,
    ),
    "gc.get_objects: checks rewritten to pass": (
        "import gc\n"
        "for o in gc.get_objects():\n"
        "    if type(o) is dict and 'checks' in o:\n"
        "        for c in o['checks']:\n"
        "            c['code'] = 'pass'\n" + WRONG,
        FUNCTION,
    ),
    "sys.settrace: results rewritten before the report": (
        "import sys\n"
        "def _tracer(frame, event, arg):\n"
        "    obj = frame.f_locals.get('obj') if event == 'call' else None\n"
        "    if type(obj) is dict and 'results' in obj:\n"
        "        for r in obj['results']:\n"
        "            r['error'] = None\n"
        "    return None\n"
        "sys.settrace(_tracer)\n" + WRONG,
        FUNCTION,
    ),
}


@pytest.fixture(params=["bwrap", "none"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(sandbox.MODE_ENV, request.param)
    return str(request.param)


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    assert sandbox.status().sandboxed, sandbox.status().reason


def assert_attack(candidate: str, checks: list[Check]) -> None:
    """The attack fools the old harness and fails the red line."""
    before = legacy_run_checks(candidate, checks)
    assert before.passed, f"not an attack: the old harness failed it too ({before})"
    after = run_checks(candidate, checks)
    assert not after.passed, after


@pytest.mark.parametrize("name", sorted(PROTOCOL_ATTACKS))
def test_a_faked_pass_fails(name: str, mode: str) -> None:
    candidate, checks = PROTOCOL_ATTACKS[name]
    assert_attack(candidate, checks)


def test_a_faked_pass_ends_a_loop_not_converged(mode: str) -> None:
    candidate, checks = PROTOCOL_ATTACKS["rigged __eq__"]
    task = Task(id="double", description="Write double(n).", kind="verifiable", checks=tuple(checks))
    result = run_task(task, ScriptedAgent(Replay("double", (candidate,))), LoopConfig(step_limit=3))
    assert not result.converged
    assert result.stop_reason in {"step_limit", "stuck"}


def test_the_honest_answer_still_passes_in_both_modes(mode: str) -> None:
    assert run_checks("def double(n):\n    return 2 * n\n", FUNCTION).passed
    assert run_checks("print(int(input()) * 2)\n", PROGRAM).passed


# -- escapes: need the sandbox ------------------------------------------------


def test_expected_output_on_disk_is_out_of_reach(sandboxed: None, tmp_path: Path) -> None:
    expected = tmp_path / "expected.txt"
    expected.write_text("4\n")
    checks = [Check(id="case_1", stdin="2\n", stdout="4\n")]
    candidate = f"print(open({str(expected)!r}).read())\n"
    assert_attack(candidate, checks)
    project = f"import os\nprint(4 if os.path.exists({str(ROOT / 'loops' / 'suite')!r}) else 0)\n"
    assert_attack(project, checks)


def test_writing_outside_the_work_folder_fails(sandboxed: None, tmp_path: Path) -> None:
    target = tmp_path / "planted.txt"
    candidate = (
        f"try:\n    open({str(target)!r}, 'w').write('x')\n    ok = True\nexcept OSError:\n    ok = False\n"
        "def double(n):\n    return 2 * n if ok else 0\n"
    )
    assert_attack(candidate, FUNCTION)
    target.unlink()
    run_checks(candidate, FUNCTION)
    assert not target.exists()


def passes_in_a_worker_with_a_secret(harness: str, candidate: str, checks: list[Check]) -> bool:
    """Run the red line in a fresh process started with SECRET_KEY in its
    environment, as a worker is (a variable set later would not show in
    /proc/<pid>/environ)."""
    code = (
        "import json, sys\n"
        "from loops.spec import Check\n"
        f"from {harness} import run_checks\n"
        "candidate, checks = json.loads(sys.stdin.read())\n"
        "print(run_checks(candidate, [Check.from_dict(c) for c in checks]).passed)\n"
    )
    env = {**os.environ, "SECRET_KEY": "worker-secret-do-not-leak", "PYTHONPATH": str(ROOT)}
    payload = json.dumps([candidate, [c.to_dict() for c in checks]])
    done = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return done.stdout.strip().splitlines()[-1] == "True"


def test_another_process_environment_is_out_of_reach(sandboxed: None) -> None:
    candidate = (
        "import glob, os\n"
        "found = False\n"
        "for path in ['/proc/%d/environ' % os.getppid(), '/proc/1/environ', *glob.glob('/proc/*/environ')]:\n"
        "    try:\n"
        "        found = found or b'worker-secret-do-not-leak' in open(path, 'rb').read()\n"
        "    except OSError:\n"
        "        pass\n"
        "def double(n):\n    return 2 * n if found else 0\n"
    )
    assert passes_in_a_worker_with_a_secret("tests.loops.legacy_harness", candidate, FUNCTION)
    assert not passes_in_a_worker_with_a_secret("loops.redline", candidate, FUNCTION)


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback service of our own, so the baseline can always connect."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def test_loopback_services_are_out_of_reach(sandboxed: None, listener: int) -> None:
    candidate = (
        "import socket\nok = False\n"
        f"for port in (5432, 6379, {listener}):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1).close()\n"
        "        ok = True\n"
        "    except OSError:\n"
        "        pass\n"
        "def double(n):\n    return 2 * n if ok else 0\n"
    )
    assert_attack(candidate, FUNCTION)


def test_the_project_database_and_secrets_are_out_of_reach(sandboxed: None) -> None:
    candidate = (
        "import os\n"
        f"root = {str(ROOT)!r}\n"
        "ok = os.path.exists(os.path.join(root, 'manage.py')) or os.path.exists(os.path.join(root, 'var'))\n"
        "def double(n):\n    return 2 * n if ok else 0\n"
    )
    assert_attack(candidate, FUNCTION)


def test_a_fork_of_150_processes_fails_inside_and_spares_the_worker(sandboxed: None) -> None:
    candidate = (
        "import os, time\nok = True\npids = []\n"
        "for _ in range(150):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        ok = False\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(0.5)\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "for pid in pids:\n    os.waitpid(pid, 0)\n"
        "def double(n):\n    return 2 * n if ok else 0\n"
    )
    assert_attack(candidate, FUNCTION)
    assert subprocess.run(["true"], check=False).returncode == 0  # the worker still forks


def _sleepers(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry))
    return pids


def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_setsid_grandchild_does_not_outlive_the_check(sandboxed: None) -> None:
    marker = "31.4159"
    candidate = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        null = os.open('/dev/null', os.O_RDWR)\n"  # let go of the harness's pipes
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        f"        os.execv('/usr/bin/sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n"
        "import time\n"
        "alive = False\n"
        "for _ in range(50):\n"  # the answer is right only once the grandchild runs
        "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        f"            alive = alive or b'{marker}' in open('/proc/%s/cmdline' % pid, 'rb').read()\n"
        "        except OSError:\n"
        "            pass\n"
        "    if alive:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "def double(n):\n    return 2 * n if alive else 0\n"
    )
    try:
        assert legacy_run_checks(candidate, FUNCTION).passed
        assert _within(5, lambda: bool(_sleepers(marker))), "the old harness lets the grandchild outlive the check"
        for pid in _sleepers(marker):
            os.kill(pid, 9)
        assert _within(5, lambda: not _sleepers(marker))
        assert run_checks(candidate, FUNCTION).passed  # so the grandchild did run in the sandbox
        # The pid namespace is torn down as bubblewrap dies; give the kernel a moment.
        assert _within(5, lambda: not _sleepers(marker))
        time.sleep(1)
        assert _sleepers(marker) == []  # and it stays gone
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, 9)


def test_a_hostile_check_cannot_read_the_worker_either(sandboxed: None) -> None:
    check = Check(
        id="check_1",
        code=(
            "import glob, os\n"
            "seen = b''\n"
            "for path in ['/proc/%d/environ' % os.getppid(), *glob.glob('/proc/*/environ')]:\n"
            "    try:\n"
            "        seen += open(path, 'rb').read()\n"
            "    except OSError:\n"
            "        pass\n"
            "assert b'worker-secret-do-not-leak' in seen\n"
        ),
    )
    assert passes_in_a_worker_with_a_secret("tests.loops.legacy_harness", WRONG, [check])
    assert not passes_in_a_worker_with_a_secret("loops.redline", WRONG, [check])
    files = Check(id="check_2", code=f"assert open({str(ROOT / 'manage.py')!r}).read()")
    assert legacy_run_checks(WRONG, [files]).passed
    assert not run_checks(WRONG, [files]).passed


def test_the_sandbox_is_really_in_use(sandboxed: None) -> None:
    facts = (
        "import os, socket\n"
        "def facts():\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "        net = 'reachable'\n"
        "    except OSError as exc:\n"
        "        net = type(exc).__name__\n"
        "    return {\n"
        "        'uid': os.getuid(),\n"
        "        'interfaces': [name for _, name in socket.if_nameindex()],\n"
        "        'net': net,\n"
        "        'pid1_environ': open('/proc/1/environ', 'rb').read(),\n"
        "        'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),\n"
        f"        'project': os.path.exists({str(ROOT)!r}),\n"
        "        'etc': os.path.exists('/etc/passwd'),\n"
        "    }\n"
    )
    uid = sandbox.INSIDE_UID
    expected = (
        f"assert f['uid'] == {uid}, 'uid'\n"
        "assert f['interfaces'] == ['lo'], 'interfaces'\n"
        "assert f['net'] != 'reachable', 'net'\n"  # lo is down: not even loopback
        "assert f['pid1_environ'] == b'', 'environ'\n"
        "assert max(f['pids']) < 10, 'pids'\n"  # its own pid namespace
        "assert not f['project'] and not f['etc'], 'files'\n"
    )
    # The candidate's sandbox, seen through plain data, and the checks' own.
    candidate_side = Check(id="candidate", code="f = facts()\n" + expected)
    checks_side = Check(id="checks", code=facts + "f = facts()\n" + expected)
    result = run_checks(facts, [candidate_side, checks_side])
    assert result.passed, result


def test_it_fails_closed_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    status = sandbox.status()
    assert not status.sandboxed and "not installed" in status.reason
    with pytest.raises(sandbox.SandboxUnavailable, match="REDLINE_SANDBOX=none"):
        run_checks(WRONG, FUNCTION)


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.MODE_ENV, "off")
    with pytest.raises(sandbox.SandboxUnavailable, match="must be"):
        run_checks(WRONG, FUNCTION)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker drops to REDLINE_SANDBOX_UID")
@pytest.mark.parametrize("uid", ["0", "nobody"])
def test_a_root_worker_refuses_a_privileged_or_bad_sandbox_uid(uid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setenv(sandbox.UID_ENV, uid)
    assert not sandbox.status().sandboxed
    with pytest.raises(sandbox.SandboxUnavailable, match="unprivileged uid"):
        run_checks(WRONG, FUNCTION)


def test_the_cli_says_why_it_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from loops.__main__ import main

    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    assert main(["suite"]) == 2
    assert "REDLINE_SANDBOX=none" in capsys.readouterr().err


def test_without_the_sandbox_the_candidate_still_works_in_an_empty_folder_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(sandbox.MODE_ENV, "none")
    candidate = "import os\nplace = os.getcwd()\nfiles = os.listdir('.')\n"
    result = run_checks(candidate, [Check(id="check_1", code=f"assert files == [] and place != {str(ROOT)!r}")])
    assert result.passed, result
    echo = "print(int(input()) * 2)\n"  # program checks keep their stdin files there
    assert run_checks(echo, [Check(id="case_1", stdin="7\n", stdout="14\n")]).passed
