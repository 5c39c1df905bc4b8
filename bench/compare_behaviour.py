"""Same seed, same arguments, two checkouts: are the outputs identical?

    .venv/bin/python bench/compare_behaviour.py --before ../old --after .

Runs, in each checkout with that checkout's own ``.venv/bin/python``, the
stop-rule bench (``python -m loops bench stop-rules --sigma 0.1 --json``, its
seeds fixed by ``--seeds``), the capacity model for every preset
(``python -m simulation run --preset X --seed 1 --json``) and the "add a
queue" what-if of several queues sharing one reviewer pool, in both models
(``python -m simulation queues ... --add ... --json``), and compares the
outputs byte for byte. Prints one line per command, "identical" or, for JSON,
each key whose value differs or exists on one side only (a unified diff for
anything else), and exits 1 if any output differs (2 if a command fails).
``--allow-added scenario.initial_ages_min`` accepts a key present only after,
for a field added with a default that changes nothing; such keys are still
printed. A key inside a list is written with its index (``queues[1].slug``);
an allowed key may leave the index out (``queues[].slug``) or start with
``*`` to match any prefix (``*initial_ages_min``). Meant for a restructuring
that should change no behaviour: run it on the commit before and the commit
after.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path


def commands(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    stop_rules = [
        "-m",
        "loops",
        "bench",
        "stop-rules",
        "--sigma",
        "0.1",
        "--seeds",
        str(args.seeds),
        "--tasks",
        str(args.tasks),
        "--json",
    ]
    runs = [("stop-rules", stop_rules)]
    for preset in args.presets.split(","):
        sim = ["-m", "simulation", "run", "--preset", preset, "--seed", str(args.seed)]
        sim += ["--replications", str(args.replications), "--workers", "1", "--json"]
        runs.append((f"simulation {preset}", sim))
    for model in ("poisson", "article"):
        queues = ["-m", "simulation", "queues", "--queue", "support:1.2:30", "--queue", "billing:0.8:30"]
        queues += ["--review-per-min", "3", "--reviewers", "2", "--model", model, "--add", "batch:1.5:30"]
        queues += ["--replications", str(args.replications), "--seed", str(args.seed), "--json"]
        runs.append((f"simulation queues --add ({model})", queues))
    return runs


def run(checkout: Path, argv: list[str]) -> str:
    python = checkout / ".venv" / "bin" / "python"
    done = subprocess.run([str(python), *argv], cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"{checkout}: {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}", file=sys.stderr)
        sys.exit(2)
    return done.stdout


def json_differences(before: object, after: object, path: str = "") -> list[tuple[str, str]]:
    """(path, what) for every leaf that differs; what is "added", "removed" or "changed"."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in before:
                found.append((where, f"added: {json.dumps(after[key])}"))
            elif key not in after:
                found.append((where, f"removed: {json.dumps(before[key])}"))
            else:
                found += json_differences(before[key], after[key], where)
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            found
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for found in json_differences(b, a, f"{path}[{i}]")
        ]
    if before != after:
        return [(path, f"changed: {json.dumps(before)[:200]} -> {json.dumps(after)[:200]}")]
    return []


def compare(before: str, after: str, allowed: set[str]) -> tuple[bool, list[str]]:
    """(differs, lines to print)."""
    try:
        found = json_differences(json.loads(before), json.loads(after))
    except ValueError:
        diff = difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=1)
        return True, list(diff)
    accepted = [what.startswith("added") and is_allowed(where, allowed) for where, what in found]
    lines = [
        f"{where} {what}" + (" (allowed)" if ok else "") for (where, what), ok in zip(found, accepted, strict=True)
    ]
    return not all(accepted), lines


def is_allowed(where: str, allowed: set[str]) -> bool:
    """``where`` is one of the allowed keys: exactly, with its list indexes
    left out, or through a leading ``*``."""
    plain = re.sub(r"\[\d+\]", "[]", where)
    return any(key in (where, plain) or (key.startswith("*") and plain.endswith(key[1:])) for key in allowed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout before the change")
    parser.add_argument("--after", type=Path, required=True, help="checkout after the change")
    parser.add_argument("--seeds", type=int, default=10, help="stop-rule bench seeds (default 10)")
    parser.add_argument("--tasks", type=int, default=300, help="stop-rule bench tasks per seed (default 300)")
    parser.add_argument("--presets", default="A,B,C,D", help="comma-separated presets (default A,B,C,D)")
    parser.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    parser.add_argument("--replications", type=int, default=20, help="simulation replications (default 20)")
    parser.add_argument(
        "--allow-added", action="append", default=[], metavar="KEY", help="a JSON key allowed to appear only after"
    )
    args = parser.parse_args()

    differ = False
    for name, argv in commands(args):
        before, after = run(args.before.resolve(), argv), run(args.after.resolve(), argv)
        if before == after:
            print(f"{name}: identical ({len(after)} bytes)")
            continue
        differs, lines = compare(before, after, set(args.allow_added))
        differ |= differs
        print(f"{name}: {'DIFFERS' if differs else 'identical but for allowed added keys'}")
        for line in lines:
            print(f"    {line}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
