"""Submit loop runs of the built-in suite (or a task file) through Celery."""

from __future__ import annotations

import argparse
import time
import uuid

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from reviewqueue.services.runs import submit_loop


class Command(BaseCommand):
    help = "Submit the built-in task suite (or --tasks FILE) to the Celery run_loop task."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tasks", help="a YAML or JSON task file instead of the built-in suite")
        parser.add_argument("--agent", default="scripted", help="scripted | openai | command | scored")
        parser.add_argument("--batch", type=int, default=1, help="copies of the suite per round")
        parser.add_argument("--repeat", type=int, default=1, help="rounds to submit; 0 = until interrupted")
        parser.add_argument("--interval", type=float, default=10.0, help="seconds between rounds")

    def handle(self, *args: object, **options: object) -> None:
        from loops.spec import TaskError, builtin_suite, load_tasks

        try:
            tasks = load_tasks(str(options["tasks"])) if options.get("tasks") else builtin_suite()
        except (OSError, TaskError) as exc:
            raise CommandError(str(exc)) from exc
        repeat = int(options["repeat"])  # type: ignore[arg-type]
        batch = int(options["batch"])  # type: ignore[arg-type]
        agent = str(options["agent"])
        rounds = 0
        try:
            while repeat == 0 or rounds < repeat:
                rounds += 1
                todo = [task for _ in range(batch) for task in tasks]
                for task in tqdm(todo, desc=f"round {rounds}", unit="run", disable=not self.stdout.isatty()):
                    submit_loop(task=task.to_dict(), run_id=f"{task.id}-{uuid.uuid4().hex[:12]}", agent=agent)
                self.stdout.write(f"round {rounds}: submitted {len(todo)} loop runs")
                if repeat == 0 or rounds < repeat:
                    time.sleep(float(options["interval"]))  # type: ignore[arg-type]
        except KeyboardInterrupt:
            self.stdout.write("stopped")
