"""Assertion-safe hints (ARCHITECTURE.md rule 5).

The next prompt is rebuilt from what the agent did: its failure class, which
check ids failed, the attempt count, and what its own code raised or printed.
Every fragment passes :func:`redact`, which drops the fragment whole when any
hidden check text shows up in it, exact or transformed: quoting (repr, JSON,
shell), ANSI colour codes, line wrapping, diff and pytest prefixes,
whitespace and case changes, HTML entities, percent and unicode escapes.
Dropping rather than cutting out is the fail-closed choice: a half-removed
copy is still a leak. There is deliberately no switch to turn this off.
"""

from __future__ import annotations

import codecs
import html
import json
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

REDACTED = "[withheld: it would reveal a hidden check]"

# A hidden text shorter than this (after normalising) is not looked for on its
# own: "4" or "ok" would match nearly everything. Longer texts are also matched
# by any window of this many characters, so a truncated or partly mangled copy
# still counts as a copy.
MIN_SECRET = 3
WINDOW = 12
_DECODE_DEPTH = 4
# Past this many readings of one fragment the redactor stops looking and
# drops the fragment: a fragment that needs more unpacking is not a hint.
_MAX_READINGS = 500

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x9b[0-9;?]*[@-~]")
# What is left of a colour code once its escape byte was lost or escaped.
_ANSI_RESIDUE = re.compile(r"\[[0-9;]*m")
_LINE_PREFIX = re.compile(r"^(?:[ \t]*(?:E(?=\s)|[+\->|]+))+", re.MULTILINE)
_WHITESPACE = re.compile(r"\s+")


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _strip_ansi(text: str) -> str:
    # Repeat until stable: colour codes wrapped around colour codes.
    previous = None
    while previous != text:
        previous = text
        text = _ANSI.sub("", text)
    # Only then the residue of codes whose escape byte was lost, and stray
    # escape bytes: removing residue first would orphan real escape bytes.
    return _ANSI_RESIDUE.sub("", text).replace("\x1b", "").replace("\x9b", "")


def _unwrap(text: str) -> str:
    """Undo line wrapping and diff/pytest prefixes: drop the prefixes, then
    every whitespace character, so an escape split across lines rejoins."""
    return _WHITESPACE.sub("", _LINE_PREFIX.sub("", text))


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    try:
        raw = text.encode("latin-1", "backslashreplace")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return codecs.decode(raw, "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        # A malformed escape somewhere: read it with the backslashes dropped.
        return text.replace("\\", "")


def _json_string(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str) else text


# Every way a reader could peel one layer off a fragment. Casefolding is a
# layer too: an upper-cased escape (\\U0061, %2f) only decodes once lowered.
_LAYERS: tuple[Callable[[str], str], ...] = (
    _nfkc,
    _strip_ansi,
    _unwrap,
    html.unescape,
    unquote,
    unquote_plus,
    _unescape,
    _json_string,
    str.casefold,
)


def readings(text: str) -> set[str] | None:
    """The fragment as a reader could decode it, up to a few layers deep, in
    any order; None when there are too many readings to check them all."""
    seen = {text}
    frontier = [text]
    for _ in range(_DECODE_DEPTH):
        found = []
        for item in frontier:
            for layer in _LAYERS:
                peeled = layer(item)
                # Cleaning up colour codes and compatibility forms costs no
                # depth: they wrap any layer and hide nothing of their own.
                for reading in (peeled, _strip_ansi(_nfkc(peeled))):
                    if reading not in seen:
                        seen.add(reading)
                        found.append(reading)
                        if len(seen) > _MAX_READINGS:
                            return None
        if not found:
            break
        frontier = found
    return seen


def normalise(text: str) -> str:
    """The letters and digits of ``text``, case-folded, without colour codes,
    quoting, punctuation or whitespace."""
    text = _strip_ansi(_nfkc(text)).casefold()
    return "".join(ch for ch in text if ch.isalnum())


@dataclass(frozen=True)
class Redactor:
    """Knows the hidden texts of one task; decides which fragments may pass."""

    windows: frozenset[str]  # every WINDOW-long slice of a long secret
    short: tuple[str, ...]  # secrets between MIN_SECRET and WINDOW long

    @classmethod
    def for_secrets(cls, secrets: Iterable[str]) -> Redactor:
        windows: set[str] = set()
        short: set[str] = set()
        for secret in secrets:
            for variant in readings(secret) or {secret}:
                flat = normalise(variant)
                if len(flat) < MIN_SECRET:
                    continue
                if len(flat) <= WINDOW:
                    short.add(flat)
                else:
                    windows.update(_slices(flat))
        return cls(frozenset(windows), tuple(sorted(short)))

    def leaks(self, fragment: str) -> bool:
        """Whether ``fragment`` may reveal a hidden text; True when unsure."""
        if not (self.windows or self.short) or not fragment:
            return False
        variants = readings(fragment)
        if variants is None:
            return True
        for variant in variants:
            flat = normalise(variant)
            if any(needle in flat for needle in self.short):
                return True
            if self.windows and not self.windows.isdisjoint(_slices(flat)):
                return True
        return False

    def redact(self, fragment: str) -> str:
        """``fragment`` unchanged, or a placeholder when it reveals a secret."""
        return REDACTED if self.leaks(fragment) else fragment


def _slices(flat: str) -> set[str]:
    return {flat[i : i + WINDOW] for i in range(len(flat) - WINDOW + 1)}


def redact(fragment: str, secrets: Iterable[str]) -> str:
    return Redactor.for_secrets(secrets).redact(fragment)


@dataclass(frozen=True)
class Failure:
    """What one failed attempt did, as the hint builder may use it."""

    attempt: int
    failure_class: str
    failed_checks: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    log_tail: str = ""
    # The attempt's grade, when its hidden checks ran: how many of how many
    # passed, and the failing checks that passed in an earlier attempt.
    checks_passed: int | None = None
    checks_total: int = 0
    regressed_checks: tuple[str, ...] = ()


_CLASS_ADVICE = {
    "AssertionError": "your code ran but gave a wrong result",
    "FormatError": "your answer did not have the required format",
    "GateFailed": "your answer failed a mechanical quality gate",
    "Timeout": "your code did not finish in time (an endless loop?)",
    "ResourceLimit": "your code exceeded its CPU or memory limit",
    "MemoryError": "your code ran out of memory",
    "SyntaxError": "your code does not parse",
    "NameError": "your code uses a name it never defines",
    "AgentError": "no answer arrived",
}


@dataclass(frozen=True)
class Resume:
    """Where a run resumed after a reviewer sent its output back starts: the
    output the reviewer saw, and the reviewer's note about it."""

    output: str
    note: str


# The first line of a resumed run's addition to the prompt.
RESUME_HEADER = "A reviewer sent an earlier answer to this task back for another try."


def resume_block(resume: Resume, redactor: Redactor) -> str:
    """What a resumed run's prompts add after the task: the earlier answer
    and the reviewer's note. The note is a fragment like any hint and passes
    the redactor (a reviewer who quotes a hidden check must not hand it to
    the agent); the earlier answer is the agent's own text and is shown as it
    was, since it reveals nothing the agent did not write."""
    note = redactor.redact(resume.note.strip())
    return "\n".join(
        [
            RESUME_HEADER,
            "The earlier answer:",
            resume.output.rstrip() or "(empty)",
            "",
            f"The reviewer's note: {note}",
            "Start from the earlier answer and change what the note asks for.",
        ]
    )


def build_prompt(
    description: str,
    history: Sequence[Failure],
    redactor: Redactor,
    *,
    step_limit: int,
    open_task: bool = False,
    resume: Resume | None = None,
) -> str:
    """The prompt for the next attempt: the task plus hints about the last
    failure, each fragment redacted. Assertion texts never enter here, so the
    redactor is the second wall, not the first. A resumed run (``resume``)
    carries the earlier answer and the reviewer's note in every prompt: an
    agent is asked afresh each attempt and would otherwise lose the note."""
    attempt = len(history) + 1
    parts = [description.strip()]
    if resume is not None:
        parts.append(resume_block(resume, redactor))
    if open_task and attempt > 1:
        parts.append(f"This is attempt {attempt} of {step_limit}. Improve your previous answer.")
    if not history:
        return "\n\n".join(parts)
    last = history[-1]
    lines = [f"Attempt {attempt} of {step_limit}. Your previous answer (attempt {last.attempt}) failed."]
    advice = _CLASS_ADVICE.get(last.failure_class, "your code raised an error")
    lines.append(redactor.redact(f"Failure class: {last.failure_class} ({advice})."))
    if last.checks_passed is not None and last.checks_total:
        # Freeze what already passes: the agent is told how much works and
        # that it must keep working, never what those checks test.
        lines.append(
            f"Hidden checks passing: {last.checks_passed} of {last.checks_total}."
            + (" They must keep passing: change only what the failing checks need." if last.checks_passed else "")
        )
    if last.failed_checks:
        lines.append(redactor.redact("Failing hidden checks: " + ", ".join(last.failed_checks) + "."))
    if last.regressed_checks:
        lines.append(
            redactor.redact(
                "Regression: "
                + ", ".join(last.regressed_checks)
                + " passed in an earlier attempt and fail now. Your last change broke them; undo that part."
            )
        )
    for message in dict.fromkeys(last.messages):
        lines.append(redactor.redact(f"Your code raised: {message}"))
    if last.log_tail.strip():
        lines.append(redactor.redact("Your code printed:\n" + last.log_tail))
    earlier = [f.failure_class for f in history]
    if len(earlier) > 1:
        lines.append(redactor.redact("Failure classes so far: " + " -> ".join(earlier) + "."))
    lines.append("The hidden checks are not shown. Fix the cause and answer again.")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)
