"""Export verdicts as CSV or JSON Lines from a shell: the web export's twin."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from reviewqueue.export import export_lines
from reviewqueue.forms import ExportForm


class Command(BaseCommand):
    help = "Stream verdicts as CSV or JSONL, filtered by time range, label and reviewer."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--format", choices=["csv", "jsonl"], default="csv")
        parser.add_argument("--since", help="ISO date/time (inclusive)")
        parser.add_argument("--until", help="ISO date/time (exclusive)")
        parser.add_argument("--label", choices=["unverified", "sampled"])
        parser.add_argument("--reviewer", help="username")
        parser.add_argument("--dataset", action="store_true", help="add the task text, output and last error")
        parser.add_argument("--output", "-o", help="file to write (default: stdout)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args: Any, **options: Any) -> None:
        form = ExportForm(
            {
                "format": options["format"],
                "since": options["since"] or "",
                "until": options["until"] or "",
                "label": options["label"] or "",
                "reviewer": options["reviewer"] or "",
                "dataset": options["dataset"],
            }
        )
        if not form.is_valid():
            problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
            raise CommandError(problems)
        queryset = form.queryset()
        total = queryset.count()
        lines = export_lines(queryset, options["format"], options["dataset"])
        bar = tqdm(total=total, unit="verdict", disable=options["no_progress"], file=sys.stderr)
        # The CSV header is one line more than there are verdicts; the bar counts verdicts.
        skip = 1 if options["format"] == "csv" else 0
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8", newline="") as handle:
                for n, line in enumerate(lines):
                    handle.write(line)
                    bar.update(n >= skip)
        else:
            for n, line in enumerate(lines):
                self.stdout.write(line, ending="")
                bar.update(n >= skip)
        bar.close()
        self.stderr.write(f"exported {total} verdicts")
