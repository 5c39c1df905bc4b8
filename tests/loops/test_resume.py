"""A run resumed after a reviewer sent its output back: the prompt carries
the earlier answer and the reviewer's note (redacted like any hint), every
attempt of the resumed run sees them, and a scripted replay answers a resumed
prompt with what was recorded for it."""

from __future__ import annotations

from loops.agents import Replay, ScriptedAgent, make_agent, shipped_replays
from loops.hints import REDACTED, RESUME_HEADER, Failure, Redactor, Resume, build_prompt
from loops.reply import AgentReply
from loops.runner import LoopConfig, run_task
from loops.spec import Task

SECRET_CHECK = "assert shout('quiet words') == 'QUIET WORDS'"


def test_the_prompt_carries_the_earlier_answer_and_the_note() -> None:
    prompt = build_prompt(
        "Write shout(s).", [], Redactor.for_secrets([]), step_limit=3, resume=Resume("def shout(s): ...", "use upper")
    )
    assert prompt.startswith("Write shout(s).")
    assert RESUME_HEADER in prompt
    assert "def shout(s): ..." in prompt and "The reviewer's note: use upper" in prompt


def test_a_note_that_quotes_a_hidden_check_is_withheld() -> None:
    redactor = Redactor.for_secrets([SECRET_CHECK, "QUIET WORDS"])
    note = "it must pass shout('quiet words') == 'QUIET WORDS'"
    prompt = build_prompt("Write shout(s).", [], redactor, step_limit=3, resume=Resume("x", note))
    assert "QUIET" not in prompt and f"The reviewer's note: {REDACTED}" in prompt


def test_later_attempts_keep_the_note_beside_the_failure_hints() -> None:
    failure = Failure(1, "AssertionError", ("c1",), checks_passed=0, checks_total=1)
    prompt = build_prompt(
        "Write shout(s).", [failure], Redactor.for_secrets([]), step_limit=3, resume=Resume("x", "use upper")
    )
    assert "The reviewer's note: use upper" in prompt and "Failing hidden checks: c1." in prompt


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def attempt(self, prompt: str) -> AgentReply:
        self.prompts.append(prompt)
        return AgentReply(text=f"draft {len(self.prompts)}", tokens=1)


def test_every_attempt_of_a_resumed_run_sees_the_note_and_the_step_limit_is_the_configs() -> None:
    task = Task(id="essay", description="Write a note.", kind="open")
    agent = _Recorder()
    result = run_task(task, agent, LoopConfig(step_limit=3), resume=Resume("earlier draft", "shorter"))
    assert result.attempts == 3 and result.stop_reason == "step_limit"
    assert all("earlier draft" in p and "The reviewer's note: shorter" in p for p in agent.prompts)
    fresh = _Recorder()
    run_task(task, fresh, LoopConfig(step_limit=3))
    assert not any(RESUME_HEADER in p for p in fresh.prompts)


def test_a_replay_answers_a_resumed_prompt_with_its_resumed_attempts() -> None:
    agent = ScriptedAgent(Replay("t", ("first",), resumed=("after the note",)))
    assert agent.attempt("Write it.").text == "first"
    assert agent.attempt(f"Write it.\n\n{RESUME_HEADER}\n...").text == "after the note"
    plain = ScriptedAgent(Replay("t", ("first",)))
    assert plain.attempt(f"{RESUME_HEADER}").text == "first"  # nothing recorded: replays as usual


def test_the_shipped_open_replays_answer_a_send_back() -> None:
    replays = shipped_replays()
    assert replays["release_note"].resumed and replays["queue_haiku"].resumed
    task = Task(id="release_note", description="Write a release note.", kind="open")
    agent = make_agent("scripted", task=task)
    result = run_task(task, agent, LoopConfig(step_limit=3), resume=Resume("Version 2.0 is out.", "say what is new"))
    assert "send it back with a note" in result.final_output
