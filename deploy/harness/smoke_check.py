"""The end-to-end check deploy/smoke.sh runs against a running stack.

  python deploy/harness/smoke_check.py --url http://127.0.0.1:18080 --web C1,C2 --worker C1,C2 \
      --webhook-bind GATEWAY --state DIR [--outputs 200 --tasks 20 --faults]
  python deploy/harness/smoke_check.py --url ... --web C1 --verify-restore DIR   # the restore drill

It pushes outputs and submits tasks with hidden checks through
reviewqueue.client, signs a reviewer in through the proxy and decides over
HTTP, receives the signed webhooks on this host's loopback (relayed from the
container network's gateway), reads /metrics and the dashboard. With
--faults it kills one worker container mid-run and stops one web replica
mid-review. It prints one JSON line of counts and exits non-zero on any
failed expectation.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from reviewqueue.client import ApiError, Backpressure, Client, InvalidEvent, SignatureError, verify_signature

ROOT = Path(__file__).resolve().parents[2]
PODMAN = "podman"
failures: list[str] = []


def expect(ok: bool, what: str) -> None:
    print(f"  {'ok ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def sh(*args: str, check: bool = True) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:4])}...: exit {done.returncode}: {done.stderr.strip()[-800:]}")
    return done.stdout


def manage(container: str, *args: str) -> str:
    return sh(PODMAN, "exec", container, "python", "/app/manage.py", *args)


# --- webhooks: a receiver on loopback, a relay from the container network -------------------


class Receiver:
    """Collects signed webhook deliveries on 127.0.0.1; verifies each signature."""

    def __init__(self) -> None:
        self.secret = ""
        self.events: list[dict[str, Any]] = []
        self.bad_signatures = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:  # the Standard Webhooks signature, as a producer's receiver checks it
                    verify_signature(outer.secret, dict(self.headers.items()), body)
                    event: dict[str, Any] | None = json.loads(body)
                except (SignatureError, InvalidEvent):
                    event = None
                with outer.lock:
                    if event is not None:
                        outer.events.append(event)
                    else:
                        outer.bad_signatures += 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def relay(bind: str, port: int, target_port: int) -> None:
    """TCP relay bind:port -> 127.0.0.1:target_port, so containers reach a loopback receiver."""
    listener = socket.create_server((bind, port))

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            upstream = socket.create_connection(("127.0.0.1", target_port))
            threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


# --- a reviewer in the browser's place ------------------------------------------------------


class Unanswered(Exception):
    """The proxy gave no page from a live replica."""


class Reviewer:
    """Signs in through the proxy and decides with plain form POSTs (CSRF included)."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.http = httpx.Client(base_url=url, follow_redirects=True, timeout=30)
        self.upstreams: Counter[str] = Counter()
        self.http.event_hooks["response"] = [self._note]
        # Decisions answered 200 whose page does not say the verdict was
        # recorded: the item and what the page said instead.
        self.unconfirmed: list[str] = []
        page = self.http.get("/login/")
        token = self._csrf(page.text)
        signed = self.http.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": url + "/login/"},
        )
        if "/login/" in str(signed.url):
            raise SystemExit(f"sign-in failed for {username}: {signed.status_code}")
        self.url = url

    def _note(self, response: httpx.Response) -> None:
        self.upstreams[response.headers.get("X-Upstream", "?").split(",")[-1].strip()] += 1

    @staticmethod
    def _csrf(html: str) -> str:
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        if not match:
            raise Unanswered("no CSRF token on the page")
        return match.group(1)

    def decide_one(self, n: int) -> bool:
        """Claim the next item and approve or reject it; False when none waits.
        A reviewer whose click met a replica going down clicks again: an
        answer the proxy could not get (502/503, a page without its form) is
        tried again for up to 20 s, past nginx's fail_timeout."""
        deadline = time.monotonic() + 20
        while True:
            try:
                return self._decide_once(n)
            except (httpx.TransportError, Unanswered):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def _decide_once(self, n: int) -> bool:
        page = self.http.get("/review/")
        held = re.search(r'action="/review/(\d+)/decide/"', page.text)
        if not held:
            page = self.http.post(
                "/review/next/", data={"csrfmiddlewaretoken": self._csrf(page.text)}, headers={"Referer": self.url}
            )
            held = re.search(r'action="/review/(\d+)/decide/"', page.text)
            if not held:
                return False
        data = {"csrfmiddlewaretoken": self._csrf(page.text)}
        data |= {"decision": "reject", "reason_label": "logic_error"} if n % 3 == 0 else {"decision": "approve"}
        answer = self.http.post(f"/review/{held.group(1)}/decide/", data=data, headers={"Referer": self.url})
        if answer.status_code in (502, 503, 504):
            raise Unanswered(f"the proxy answered {answer.status_code}")
        if answer.status_code == 200 and "Undo (u) within" not in answer.text:
            said = re.findall(r'class="notice[^"]*"[^>]*>\s*([^<]{1,160})', answer.text)
            self.unconfirmed.append(f"#{held.group(1)} at {answer.url.path}: {said[:2]}")
        return answer.status_code == 200


# --- the check ------------------------------------------------------------------------------


def honest_tasks() -> list[dict[str, Any]]:
    suite = yaml.safe_load((ROOT / "loops/suite/builtin.yaml").read_text())["tasks"]
    keep = ("id", "kind", "description", "checks", "format_check", "priority")
    return [{k: t[k] for k in keep if k in t} for t in suite if t.get("group") == "repairable" and t.get("checks")]


def run_check(args: argparse.Namespace) -> dict[str, Any]:
    webs, workers = args.web.split(","), args.worker.split(",")
    counts: dict[str, Any] = {}
    receiver = Receiver()
    hook_port = args.webhook_port or receiver.port  # WEBHOOK_ALLOWED_HOSTS names this port
    relay(args.webhook_bind, hook_port, receiver.port)
    callback = f"http://host.containers.internal:{hook_port}/hook"

    # A producer token made in the web container; the reviewer and operator too.
    out = sh(
        PODMAN,
        "exec",
        webs[0],
        "python",
        "/app/manage.py",
        "create_api_token",
        f"smoke-{secrets.token_hex(3)}",
        "--scopes",
        "outputs,tasks",
        "--metrics",
        "--webhook",
        callback,
    ).split()
    token, receiver.secret = out[0], out[1]
    password = secrets.token_urlsafe(12)
    manage(webs[0], "setup_roles", "--user", "smoke-reviewer", "--role", "reviewer", f"--password={password}")
    manage(webs[0], "setup_roles", "--user", "smoke-operator", "--role", "operator", f"--password={password}")
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)

    client = Client(args.url, token, timeout=30)
    # 1. tasks with hidden checks: honest ones, and one whose check needs the network (the sandbox has none)
    tasks = honest_tasks()
    run_ids: dict[str, str] = {}
    hostile_task = dict(tasks[0])
    hostile_task["checks"] = [
        *tasks[0]["checks"],
        {"id": "escape", "code": "import socket; socket.create_connection(('redis', 6379), timeout=2)"},
    ]
    for i in range(args.tasks):
        hostile = i == args.tasks - 1
        task = hostile_task if hostile else tasks[i % len(tasks)]
        run = client.submit_task(task, run_id=f"smoke-run-{secrets.token_hex(4)}-{i}", agent="scripted")
        expect(not isinstance(run, Backpressure), f"task {i} accepted")
        run_ids[run.run_id] = "hostile" if hostile else "honest"
    if args.faults and len(workers) > 1:
        time.sleep(1.0)
        sh(PODMAN, "kill", workers[-1])  # mid-run: its unacknowledged loops return to the queue
        running = sum(client.run(r).outcome == "running" for r in run_ids)
        counts["runs_unfinished_at_kill"] = running
        print(f"  killed worker {workers[-1]} with {running} runs unfinished", flush=True)
        counts["worker_killed"] = workers[-1]

    deadline = time.monotonic() + args.run_timeout
    finished: dict[str, Any] = {}
    while time.monotonic() < deadline and len(finished) < len(run_ids):
        for run_id in run_ids:
            if run_id not in finished:
                try:
                    run = client.run(run_id)
                except ApiError as exc:
                    # Two cores busy with sandboxed loops: a slow answer is retried, and counted.
                    if exc.status_code < 500:
                        raise
                    counts["status_5xx_while_polling"] = counts.get("status_5xx_while_polling", 0) + 1
                    continue
                if run.outcome not in ("running", "queued", "pending", None):
                    finished[run_id] = run
        time.sleep(2)
    expect(len(finished) == len(run_ids), f"every run ended ({len(finished)}/{len(run_ids)})")
    honest_outcomes = Counter(finished[r].outcome for r, kind in run_ids.items() if kind == "honest" and r in finished)
    hostile_outcomes = [finished[r].outcome for r, kind in run_ids.items() if kind == "hostile" and r in finished]
    counts["runs_honest"] = dict(honest_outcomes)
    counts["runs_hostile"] = hostile_outcomes
    all_passed = honest_outcomes.get("auto_passed", 0) == args.tasks - 1
    expect(all_passed, "honest answers auto-passed in the worker's sandbox")
    if not all_passed:
        # Why each honest run went elsewhere: the stop reason, attempts, draft
        # mode, deliveries and error the worker recorded, to tell load from a bug.
        missed = [
            r
            for r, kind in run_ids.items()
            if kind == "honest" and (r not in finished or finished[r].outcome != "auto_passed")
        ]
        print("  honest runs that did not auto-pass:", runs_explained(webs[0], missed), flush=True)
    expect(
        bool(hostile_outcomes) and hostile_outcomes[0] != "auto_passed", "the check that needs the network did not pass"
    )

    # 2. outputs (after the runs: a full queue would put new loops in draft mode)
    def push(i: int) -> str:
        while True:
            answer = client.push_output(
                idempotency_key=f"smoke-output-{i}",
                task_description=f"Smoke task {i}: summarise the log",
                final_output=f"Summary {i}: the service restarted twice.",
                cutoff_reason="step_limit",
                attempt_count=3,
                task_id=f"smoke-{i % 10}",
            )
            if isinstance(answer, Backpressure):
                time.sleep(min(answer.retry_after or 1, 2))
                continue
            return answer.outcome

    with ThreadPoolExecutor(8) as pool:
        outcomes = Counter(pool.map(push, range(args.outputs)))
    counts["outputs"] = dict(outcomes)
    expect(sum(outcomes.values()) == args.outputs, f"{args.outputs} outputs pushed through the proxy")

    # 3. the reviewer, through the proxy, across both web replicas; one replica stops mid-way
    reviewer = Reviewer(args.url, "smoke-reviewer", password)
    decided = 0
    stopped = ""
    for n in range(args.decisions):
        if args.faults and n == args.decisions // 2 and len(webs) > 1:
            stopped = webs[-1]
            sh(PODMAN, "stop", "-t", "5", stopped)
            print(f"  stopped web replica {stopped} mid-review", flush=True)
            before_stop = len([u for u in reviewer.upstreams if u != "?"])
            counts["replicas_answering_before_stop"] = before_stop
        if reviewer.decide_one(n):
            decided += 1
    counts["decided"] = decided
    counts["upstreams"] = dict(reviewer.upstreams)
    if reviewer.unconfirmed:
        counts["decided_unconfirmed"] = reviewer.unconfirmed[:5]
    expect(decided == args.decisions, f"the reviewer decided {args.decisions} items over HTTP")
    if len(webs) > 1:
        spread = counts.get("replicas_answering_before_stop", len([u for u in reviewer.upstreams if u != "?"]))
        expect(spread >= 2, f"the reviewer's requests spread across both web replicas ({spread} answered)")

    # 4. webhooks (the sweep retries every few seconds; wait for them)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with receiver.lock:
            kinds = Counter(e.get("type") for e in receiver.events)
            # Deliveries are at least once (a retry repeats the event id): count distinct events.
            finishes = {e["id"]: e.get("run_id") for e in receiver.events if e.get("type") == "run.finished"}
            ran = Counter(finishes.values())
        if len(ran) >= len(run_ids) and kinds.get("item.decided", 0) >= decided:
            break
        time.sleep(2)
    counts["webhooks"] = dict(kinds)
    counts["bad_signatures"] = receiver.bad_signatures
    expect(
        receiver.bad_signatures == 0 and kinds.get("item.decided", 0) > 0 and kinds.get("run.finished", 0) > 0,
        "signed webhooks (run.finished, item.decided) reached the loopback receiver",
    )
    expect(
        set(ran) >= set(run_ids) and all(ran[r] == 1 for r in run_ids),
        f"every run ended exactly once (run.finished per run: {sorted(Counter(ran[r] for r in run_ids).items())})",
    )

    # 5. /metrics and the dashboard
    metrics = httpx.get(args.url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    depth = re.findall(r"^reviewqueue_depth\{[^}]*\} (\S+)", metrics.text, re.MULTILINE)
    counts["metrics_depth"] = sum(float(d) for d in depth)
    expect(metrics.status_code == 200 and bool(depth), "/metrics shows the queue")
    operator = Reviewer(args.url, "smoke-operator", password)
    dashboard = operator.http.get("/ops/")
    expect("sandboxed" in dashboard.text and "not sandboxed" not in dashboard.text, 'the dashboard says "sandboxed"')

    if stopped:
        sh(PODMAN, "start", stopped)
    if counts.get("worker_killed"):
        sh(PODMAN, "start", counts["worker_killed"])

    # What the restore drill compares: every item with its status and verdicts.
    (state / "snapshot.json").write_text(json.dumps(snapshot(webs[0])))
    return counts


def short_check(url: str, web: str, outputs: int = 20, decisions: int = 5) -> dict[str, Any]:
    """The shorter check for the Kubernetes manifests (one web pod, one worker,
    no /proc unmasking under podman kube play, so the red line must fail closed)."""
    counts: dict[str, Any] = {}
    token = sh(
        PODMAN,
        "exec",
        web,
        "python",
        "/app/manage.py",
        "create_api_token",
        "kube-smoke",
        "--scopes",
        "outputs,tasks",
        "--metrics",
    ).split()[0]
    password = secrets.token_urlsafe(12)
    manage(web, "setup_roles", "--user", "kube-reviewer", "--role", "reviewer", f"--password={password}")
    manage(web, "setup_roles", "--user", "kube-operator", "--role", "operator", f"--password={password}")
    client = Client(url, token, timeout=30)
    stored = 0
    for i in range(outputs):
        answer = client.push_output(
            idempotency_key=f"kube-output-{i}",
            task_description=f"Kube task {i}",
            final_output=f"Output {i}",
            cutoff_reason="step_limit",
        )
        stored += not isinstance(answer, Backpressure)
    counts["outputs"] = stored
    expect(stored == outputs, f"{outputs} outputs pushed")
    refused = httpx.post(
        url + "/api/tasks",
        json={"task": honest_tasks()[0], "run_id": "kube-run-1"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    counts["task_with_checks"] = refused.status_code
    expect(
        refused.status_code == 503 and refused.json().get("error") == "sandbox_unavailable",
        "a task with checks is refused where bubblewrap cannot run (fails closed)",
    )
    reviewer = Reviewer(url, "kube-reviewer", password)
    decided = sum(reviewer.decide_one(n) for n in range(decisions))
    counts["decided"] = decided
    expect(decided == decisions, f"the reviewer decided {decisions} items")
    metrics = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    expect(metrics.status_code == 200 and "reviewqueue_depth{" in metrics.text, "/metrics shows the queue")
    page = Reviewer(url, "kube-operator", password).http.get("/ops/").text
    expect('id="sandbox-banner"' in page, "the dashboard says the red line is not sandboxed")
    return counts


SNAPSHOT_CODE = """
import json
from reviewqueue.models import ReviewItem, Verdict
items = sorted(ReviewItem.objects.values_list('pk', 'status'))
verdicts = sorted(Verdict.objects.values_list('item_id', 'decision'))
print(json.dumps({'items': items, 'verdicts': verdicts}))
"""


RUNS_CODE = """
import json, sys
from reviewqueue.models import LoopRun
fields = ('run_id', 'outcome', 'stop_reason', 'attempts', 'grades', 'step_limit', 'draft', 'deliveries', 'error')
print(json.dumps(list(LoopRun.objects.filter(run_id__in=sys.argv[1:]).values(*fields)), default=str))
"""


def runs_explained(container: str, run_ids: list[str]) -> list[dict[str, Any]]:
    code = RUNS_CODE.replace("sys.argv[1:]", json.dumps(run_ids))
    return json.loads(manage(container, "shell", "-c", code).strip().splitlines()[-1])


def snapshot(container: str) -> dict[str, Any]:
    return json.loads(manage(container, "shell", "-c", SNAPSHOT_CODE).strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--web", required=True, help="web container names, comma-separated")
    p.add_argument("--worker", default="")
    p.add_argument("--webhook-bind", default="127.0.0.1", help="the stack network's gateway")
    p.add_argument("--webhook-port", type=int, default=0)
    p.add_argument("--state", default="/tmp/reviewqueue-smoke")
    p.add_argument("--outputs", type=int, default=200)
    p.add_argument("--tasks", type=int, default=20)
    p.add_argument("--decisions", type=int, default=30)
    p.add_argument("--faults", action="store_true")
    p.add_argument("--run-timeout", type=float, default=240)
    p.add_argument("--verify-restore", metavar="STATE_DIR")
    args = p.parse_args()
    if args.verify_restore:
        before = json.loads((Path(args.verify_restore) / "snapshot.json").read_text())
        after = snapshot(args.web.split(",")[0])
        counts = {"items": len(after["items"]), "verdicts": len(after["verdicts"])}
        expect(before == after, f"restored stack shows the same items and verdicts ({counts})")
    else:
        counts = run_check(args)
    print("SMOKE " + json.dumps(counts, sort_keys=True), flush=True)
    if failures:
        # On stdout, with the rest: smoke.sh keeps this log and repeats its failures last.
        print(f"{len(failures)} expectation(s) failed: {failures}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
