"""``python3 dev.py demo``'s terminal: the banner with the logins and nothing
else, while the processes' logs go to var/demo.log."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOGINS = {"reviewer": "pw-r", "reviewer2": "pw-r2", "operator": "pw-o"}


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_script_demo", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    for name in ("ensure_venv", "ensure_bubblewrap"):
        monkeypatch.setattr(module, name, lambda: None)
    monkeypatch.setattr(module, "redline_env", lambda env: env)
    monkeypatch.setattr(module.signal, "signal", lambda *args: None)
    monkeypatch.setattr(module.time, "sleep", lambda seconds: None)
    return module


def test_the_demo_prints_only_the_banner_and_logs_to_a_file(
    dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs: list[Any] = []

    def accounts(manage: list[str], env: dict[str, str], log: Any) -> dict[str, str]:
        log.write(b"Operations to perform: migrate\n")  # what migrate would say
        return LOGINS

    class FakeProcess:
        polls = 0

        def __init__(self, command: list[str], **kwargs: Any) -> None:
            outputs.append((kwargs.get("stdout"), kwargs.get("stderr")))
            kwargs["stdout"].write(b'{"level": "INFO", "message": "a log line"}\n')

        def poll(self) -> int | None:
            FakeProcess.polls += 1
            return None if FakeProcess.polls < 20 else 0  # the server stops after a few ticks

        def send_signal(self, signum: int) -> None:
            pass

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(dev, "demo_accounts", accounts)
    monkeypatch.setattr(dev.subprocess, "Popen", FakeProcess)
    assert dev.demo(port=8123) == 0
    out = capsys.readouterr().out
    banner = dev.demo_banner(8123, LOGINS, dev.demo_load())
    assert out.startswith(banner)  # nothing before the banner
    assert "reviewer / pw-r" in banner and "operator / pw-o" in banner
    assert "logs       var/demo.log" in banner
    assert "a log line" not in out and "migrate" not in out
    log = (tmp_path / "var" / "demo.log").read_text()
    assert "a log line" in log and "Operations to perform" in log
    assert len(outputs) >= 2 and all(stdout is not None and stdout is stderr for stdout, stderr in outputs)
    assert all(Path(stdout.name) == tmp_path / "var" / "demo.log" for stdout, _ in outputs)
    after = out[len(banner) :]
    assert "a demo process stopped; see var/demo.log" in after


def test_the_status_line_rewrites_itself_in_place(dev: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dev.time, "monotonic", lambda: 125.0)
    line = dev.status_line(0.0, 3)
    assert line.startswith("\r") and "\n" not in line
    assert "up 2 min 05 s" in line and "3 rounds" in line


def test_the_banner_lists_every_key_the_review_pages_help_lists(dev: ModuleType) -> None:
    help_table = (ROOT / "templates" / "review" / "queue.html").read_text().split('id="shortcuts"', 1)[1]
    keys = set(re.findall(r'<th scope="row"><kbd>([^<]+)</kbd>', help_table)) - {"Esc", "1"}
    said = dev.demo_banner(8123, LOGINS, dev.demo_load()).split("keys ", 1)[1].split(")", 1)[0].split()
    assert "n" in keys and "q" in keys
    assert keys <= set(said), f"the banner leaves out {sorted(keys - set(said))}"
