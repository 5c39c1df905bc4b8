"""A command agent for the send-back tests: the prompt arrives on stdin, the
answer leaves on stdout, as with any coding-agent CLI.

It answers the ``shout`` task wrongly unless its prompt carries a reviewer's
note asking for upper case, and answers an open task with a draft that quotes
the note, so a test can tell from the output alone whether the note reached
the prompt. Every prompt is appended to the file named by its first argument
(if given), for the test to read.
"""

from __future__ import annotations

import sys


def answer(prompt: str) -> str:
    noted = "The reviewer's note:" in prompt
    note = prompt.split("The reviewer's note:", 1)[1].splitlines()[0].strip() if noted else ""
    if "shout(" in prompt:
        if noted and "upper" in note.lower():
            return "def shout(s):\n    return s.upper()\n"
        return "def shout(s):\n    return s\n"
    return f"Draft, following: {note}" if noted else "Draft."


def main() -> None:
    prompt = sys.stdin.read()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a", encoding="utf-8") as log:
            log.write(prompt + "\n\x1e\n")  # a record separator between prompts
    sys.stdout.write(answer(prompt))


if __name__ == "__main__":
    main()
