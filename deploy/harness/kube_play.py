"""Start deploy/kubernetes/ under `podman kube play` and run a short check.

podman 4.3's kube play knows Pod, Deployment, ConfigMap and
PersistentVolumeClaim; it has no Services, Jobs, StatefulSets or Secrets, no
cluster DNS (a pod is reached as `<deployment>-pod-0` on the network), one
pod per replica, and no `procMount: Unmasked`. So the manifests are
translated, here and only here: the Job becomes a Pod, the StatefulSets
Deployments with emptyDir storage, the Secret a ConfigMap with generated
values, Services and the Ingress are dropped, service names become pod
names, the images the locally built ones, and only web publishes a port, on
loopback (kube play would publish every containerPort on the host). Everything else (commands, env, probes' commands, security
contexts) is played as written.

Without procMount the /proc masks stay, so bubblewrap cannot run here and
the red line must fail closed: the check expects tasks with hidden checks to
be refused with 503 and the dashboard to say the red line is not sandboxed.

  python deploy/harness/kube_play.py --project P --port 18080 --out kube.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import smoke_check

MANIFESTS = HERE.parent / "kubernetes"
SERVICE_HOSTS = {"@db:5432": "@db-pod-0:5432", "redis://redis:6379": "redis://redis-pod-0:6379"}


def translate(port: int) -> list[dict[str, Any]]:
    images = {
        "reviewqueue:latest": os.environ.get("RQ_IMAGE", "localhost/reviewqueue:smoke"),
        "postgres:16-bookworm": os.environ.get("POSTGRES_IMAGE", "localhost/reviewqueue-postgres"),
        "redis:7-bookworm": os.environ.get("REDIS_IMAGE", "localhost/reviewqueue-redis"),
    }
    password = secrets.token_hex(16)
    docs = [d for f in sorted(MANIFESTS.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    out: list[dict[str, Any]] = []
    for doc in docs:
        kind = doc["kind"]
        if kind in ("Service", "Ingress"):
            continue
        if kind == "Secret":
            data = dict(doc.get("stringData", {}))
            data.update(
                SECRET_KEY=secrets.token_urlsafe(50),
                POSTGRES_PASSWORD=password,
                DATABASE_URL=f"postgres://reviewqueue:{password}@db:5432/reviewqueue",
            )
            doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"], "data": data}
        if kind == "ConfigMap" and doc["metadata"]["name"] == "reviewqueue-config":
            doc["data"].update(
                ALLOWED_HOSTS="127.0.0.1,localhost",
                CSRF_TRUSTED_ORIGINS=f"http://127.0.0.1:{port}",
                BEHIND_TLS_PROXY="0",
                SECURE_SSL_REDIRECT="0",
                SESSION_COOKIE_SECURE="0",
                CSRF_COOKIE_SECURE="0",
                SECURE_HSTS_SECONDS="0",
                LOG_LEVEL="WARNING",
                WEB_CONCURRENCY="1",
            )
        if doc["kind"] == "ConfigMap":
            for key, value in doc["data"].items():
                for old, new in SERVICE_HOSTS.items():
                    value = value.replace(old, new)
                doc["data"][key] = value
        if kind == "StatefulSet":
            spec = doc["spec"]
            claims = spec.pop("volumeClaimTemplates", [])
            spec.pop("serviceName", None)
            spec["template"]["spec"]["volumes"] = [{"name": c["metadata"]["name"], "emptyDir": {}} for c in claims]
            doc["kind"], doc["apiVersion"] = "Deployment", "apps/v1"
        if kind == "Job":
            template = doc["spec"]["template"]
            doc = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": doc["metadata"]["name"]},
                "spec": template["spec"],
            }
        if doc["kind"] == "ConfigMap":
            out.append(doc)
            continue
        pod = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
        pod.pop("hostUsers", None)
        for container in pod["containers"]:
            container["image"] = images.get(container["image"], container["image"])
            for ref in container.get("envFrom", []):
                if "secretRef" in ref:
                    ref["configMapRef"] = ref.pop("secretRef")
            for env in container.get("env", []):
                key_ref = env.get("valueFrom", {}).pop("secretKeyRef", None)
                if key_ref:
                    env["valueFrom"]["configMapKeyRef"] = key_ref
            # kube play publishes every containerPort on the host: only web's, on loopback.
            container.pop("ports", None)
            if doc["metadata"]["name"] == "web":
                doc["spec"]["replicas"] = 1  # one hostPort, one pod (podman has no Service to spread over replicas)
                container["ports"] = [{"containerPort": 8000, "hostPort": port, "hostIP": "127.0.0.1"}]
        out.append(doc)
    return out


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:4])}: exit {done.returncode}: {done.stderr.strip()[-1500:]}")
    return done


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--project", default="rqsmoke")
    p.add_argument("--port", type=int, default=18080)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = Path(args.out)
    out.write_text(yaml.safe_dump_all(translate(args.port), sort_keys=False))
    network = f"{args.project}-kube"
    sh("podman", "network", "create", network, check=False)
    started = time.monotonic()
    sh("podman", "kube", "play", "--network", network, str(out))
    url = f"http://127.0.0.1:{args.port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health/", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(1)
    else:
        for pod in ("reviewqueue-migrate", "web-pod-0"):
            print(sh("podman", "pod", "logs", "--tail", "20", pod, check=False).stdout[-3000:], file=sys.stderr)
        raise SystemExit("the kube play stack did not become healthy")
    healthy = round(time.monotonic() - started)
    print(f"  ok  kube play stack healthy after {healthy}s", flush=True)
    web = next(n for n in sh("podman", "ps", "--format", "{{.Names}}").stdout.split() if n.startswith("web-pod-0-"))
    migrate = sh("podman", "ps", "-a", "--format", "{{.Names}} {{.Status}}").stdout
    counts = smoke_check.short_check(url, web)
    counts["healthy_s"] = healthy
    smoke_check.expect(
        any(line.startswith("reviewqueue-migrate-") and "Exited (0)" in line for line in migrate.splitlines()),
        "the migration pod ran to completion",
    )
    print("KUBE " + json.dumps(counts, sort_keys=True), flush=True)
    if smoke_check.failures:
        sys.exit(f"{len(smoke_check.failures)} expectation(s) failed: {smoke_check.failures}")


if __name__ == "__main__":
    main()
