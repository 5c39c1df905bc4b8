"""The container deployment's contracts that need no container to check:
what compose.yaml requires and publishes, that .env.example explains every
setting it reads, and that the Kubernetes manifests carry no secret and run
nothing as root. deploy/smoke.sh checks the running stack."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = (ROOT / "compose.yaml").read_text()
SERVICES: dict[str, Any] = yaml.safe_load(COMPOSE)["services"]
INTERPOLATED = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE))


def _env_example() -> dict[str, str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    settings = {}
    for i, line in enumerate(lines):
        if line and not line.startswith("#"):
            name = line.split("=", 1)[0]
            settings[name] = lines[i - 1]  # the comment above it
    return settings


def test_the_stack_has_every_service_with_two_web_replicas_and_one_beat() -> None:
    assert set(SERVICES) == {"db", "redis", "migrate", "web", "worker", "beat", "proxy"}
    assert "${WEB_REPLICAS:-2}" in COMPOSE and "replicas" not in SERVICES["beat"].get("deploy", {})
    for name in ("web", "worker", "beat"):
        assert "migrate" in SERVICES[name]["depends_on"]
    assert SERVICES["web"]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_secret_key_is_required_and_has_no_default() -> None:
    assert re.search(r"SECRET_KEY: \$\{SECRET_KEY:\?[^}]+\}", COMPOSE)
    assert not re.search(r"SECRET_KEY:-", COMPOSE)


def test_images_can_be_overridden_and_only_loopback_is_published_by_default() -> None:
    for variable in ("RQ_IMAGE", "POSTGRES_IMAGE", "REDIS_IMAGE", "PROXY_IMAGE"):
        assert variable in INTERPOLATED
    published = [(name, port) for name, service in SERVICES.items() for port in service.get("ports", [])]
    assert published == [("proxy", "${RQ_BIND:-127.0.0.1}:${RQ_PORT:-8000}:8080")]


def test_the_sandbox_gets_no_capability_only_the_proc_and_seccomp_it_needs() -> None:
    for name in ("web", "worker", "beat", "migrate"):
        service = SERVICES[name]
        assert service["cap_drop"] == ["ALL"] and "cap_add" not in service
        assert set(service["security_opt"]) == {
            "no-new-privileges:true",
            "systempaths=unconfined",
            "seccomp=deploy/seccomp.json",
        }
    assert (ROOT / "deploy/seccomp.json").exists()


def test_env_example_explains_every_setting_compose_reads() -> None:
    explained = _env_example()
    for variable in INTERPOLATED - {"RQ_ENV_FILE"}:  # the env file names itself
        assert variable in explained, f"{variable} is read by compose.yaml but missing from .env.example"
        assert explained[variable].startswith("#"), f"{variable} has no one-line explanation"
    assert (ROOT / ".env.example").read_text().count("SECRET_KEY=\n") == 1  # empty: no default secret


def test_kubernetes_manifests_carry_no_secret_and_run_nothing_as_root() -> None:
    docs = [d for f in sorted((ROOT / "deploy/kubernetes").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    kinds = {d["kind"] for d in docs if d}
    assert {"ConfigMap", "Secret", "Job", "Deployment", "Service", "StatefulSet"} <= kinds
    secret = next(d for d in docs if d and d["kind"] == "Secret")
    assert all("CHANGE-ME" in value for value in secret["stringData"].values())
    for doc in docs:
        if doc and doc["kind"] in ("Deployment", "Job") and doc["metadata"]["name"] != "db":
            spec = doc["spec"]["template"]["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True
            for container in spec["containers"]:
                assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
                assert container["securityContext"]["allowPrivilegeEscalation"] is False


def _compose_tools() -> list[list[str]]:
    """The compose implementations on this machine that can read the file
    without a container engine: `docker compose` (v2) and Debian's
    `docker-compose` (v1, which validates against the compose schema)."""
    tools = []
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], check=False, capture_output=True).returncode == 0
    ):
        tools.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        tools.append(["docker-compose"])
    return tools


@pytest.mark.parametrize("tool", _compose_tools() or [pytest.param([], marks=pytest.mark.skip("no docker compose"))])
def test_docker_compose_accepts_the_file_and_refuses_it_without_secret_key(tool: list[str], tmp_path: Path) -> None:
    # An env file of our own, so a developer's .env beside compose.yaml plays no part.
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    base = [*tool, "--env-file", str(env_file), "-f", str(ROOT / "compose.yaml"), "config"]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RQ_ENV_FILE": str(ROOT / ".env.example")}

    ok = subprocess.run(
        [*base, "-q"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env | {"SECRET_KEY": "k", "POSTGRES_PASSWORD": "p"},
    )
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(
        [*base, "-q"], check=False, cwd=ROOT, capture_output=True, text=True, env=env | {"POSTGRES_PASSWORD": "p"}
    )
    assert refused.returncode != 0 and "set SECRET_KEY in .env" in refused.stderr


def test_the_settings_file_and_backups_stay_out_of_git_and_the_build() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", ".env", "reviewqueue.dump", ".client/bin/python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ignored.stdout.split() == [".env", "reviewqueue.dump", ".client/bin/python"]
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert {".env", "*.dump", ".client"} <= set(dockerignore)


def test_build_image_reads_the_images_from_env_and_mounts_pip_settings_in_the_dependency_stage_only(
    tmp_path: Path,
) -> None:
    # A copy of the script beside a .env, with a podman that records its arguments.
    (tmp_path / "deploy/harness").mkdir(parents=True)
    for name in ("deploy/build-image.sh", "deploy/harness/pip_for_build.py"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    (tmp_path / ".env").write_text("RQ_IMAGE=example/rq:2\nBASE_IMAGE=localhost/reviewqueue-python\n")
    log = tmp_path / "podman.log"
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\necho "$*" >>{log}\n[ "$1" = image ] && echo 123000000\nexit 0\n')
    fake.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PODMAN": str(fake), "PIP_CERT": "/etc/hostname"}
    done = subprocess.run(
        ["bash", str(tmp_path / "deploy/build-image.sh")], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    stage, final, _inspect = log.read_text().splitlines()
    for build in (stage, final):
        assert "--format docker" in build and "--build-arg BASE_IMAGE=localhost/reviewqueue-python" in build
    assert "--target build" in stage and "/etc/pip.conf:ro" in stage and "/etc/hostname:/etc/hostname:ro" in stage
    assert "--volume" not in final and final.endswith("-t example/rq:2 .")
