"""Assertion-safe hints (DESIGN.md rule 5).

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

REDACTED = "[withheld: it would reveal a hidden check]"

# A hidden text shorter than this (after normalising) is not looked for on its
# own: "4" or "ok" would match nearly everything. Longer texts are also matched
# by any window of this many characters, so a truncated or partly mangled copy
# still counts as a copy.
MIN_SECRET = 3
WINDOW = 12
_DECODE_ROUNDS = 3

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x9b[0-9;?]*[@-~]")
# What is left of a colour code once its escape byte was lost or escaped.
_ANSI_RESIDUE = re.compile(r"\[[0-9;]*m")
_LINE_PREFIX = re.compile(r"^[ \t]*(?:E(?=\s)|[+\->|]+)", re.MULTILINE)


def _decodings(text: str) -> set[str]:
    """The fragment as a reader could decode it, layer after layer."""
    seen = {text}
    frontier = {text}
    for _ in range(_DECODE_ROUNDS):
        found: set[str] = set()
        for item in frontier:
            for decoded in _decode_once(item):
                if decoded not in seen:
                    found.add(decoded)
        seen |= found
        frontier = found
        if not frontier:
            break
    return seen


def _decode_once(text: str) -> list[str]:
    out = [html.unescape(text), unquote(text), unquote_plus(text)]
    if "\\" in text:
        try:
            raw = text.encode("latin-1", "backslashreplace")
            out.append(codecs.decode(raw, "unicode_escape"))
        except (UnicodeDecodeError, ValueError):
            # A malformed escape: also try with the bad backslashes dropped.
            out.append(text.replace("\\", ""))
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, str):
        out.append(value)
    return out


def normalise(text: str, *, strip_markup: bool = True) -> str:
    """The letters and digits of ``text``, case-folded, without quoting,
    punctuation or whitespace; with ``strip_markup`` also without colour codes
    and diff or pytest line prefixes."""
    if strip_markup:
        text = _ANSI.sub("", text)
        text = _ANSI_RESIDUE.sub("", text)
        text = _LINE_PREFIX.sub("", text)
    text = unicodedata.normalize("NFKC", text).casefold()
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
            for variant in _decodings(secret):
                for flat in {
                    normalise(variant),
                    normalise(variant, strip_markup=False),
                }:
                    if len(flat) < MIN_SECRET:
                        continue
                    if len(flat) <= WINDOW:
                        short.add(flat)
                    else:
                        windows.update(_slices(flat))
        return cls(frozenset(windows), tuple(sorted(short)))

    def leaks(self, fragment: str) -> bool:
        if not (self.windows or self.short) or not fragment:
            return False
        # A fragment is read both with and without markup stripping, since a
        # line that happens to start with "E " may be secret text, not a prefix.
        for variant in _decodings(fragment):
            for flat in {normalise(variant), normalise(variant, strip_markup=False)}:
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


def build_prompt(
    description: str,
    history: Sequence[Failure],
    redactor: Redactor,
    *,
    step_limit: int,
    open_task: bool = False,
) -> str:
    """The prompt for the next attempt: the task plus hints about the last
    failure, each fragment redacted. Assertion texts never enter here, so the
    redactor is the second wall, not the first."""
    attempt = len(history) + 1
    parts = [description.strip()]
    if open_task and attempt > 1:
        parts.append(f"This is attempt {attempt} of {step_limit}. Improve your previous answer.")
    if not history:
        return "\n\n".join(parts)
    last = history[-1]
    lines = [f"Attempt {attempt} of {step_limit}. Your previous answer (attempt {last.attempt}) failed."]
    advice = _CLASS_ADVICE.get(last.failure_class, "your code raised an error")
    lines.append(redactor.redact(f"Failure class: {last.failure_class} ({advice})."))
    if last.failed_checks:
        lines.append(redactor.redact("Failing hidden checks: " + ", ".join(last.failed_checks) + "."))
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
