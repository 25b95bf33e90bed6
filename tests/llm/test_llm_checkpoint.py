"""Per-prompt checkpoints of LLM answers inside a stage (``checkray.engine.llm_checkpoint``): errors
are never committed, a rerun asks exactly the prompts without an answer whatever the
batching, parts are few, and a run SIGKILLed mid-stage resumes without redoing parts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from checkray.engine.llm import Generation, GenerationParams, LLMError, failed_generation, make_generation
from checkray.engine.llm_checkpoint import StageChat, prompt_key
from checkray.engine.stages import RunDir, Stage, StageRunner

PARAMS = GenerationParams(seed=3, temperature=0.7, max_tokens=8)


def msgs(i: int) -> list[dict]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"prompt {i}"}]


class FlakyChat:
    """Echoes each prompt; the prompts in ``failing`` come back as errors."""

    name = "flaky"

    def __init__(self, failing=()):
        self.failing = set(failing)
        self.asked: list[str] = []

    def __call__(self, messages_list, params) -> list[Generation]:
        out = []
        for m in messages_list:
            text = m[-1]["content"]
            self.asked.append(text)
            out.append(
                failed_generation("HTTP 503: busy") if text in self.failing else make_generation(f"re {text}", "stop")
            )
        return out


def llm_stage(chat, n: int, batch: int, part_size: int = 64, progress=None) -> Stage:
    def run(ctx):
        with StageChat(chat, ctx, "model-x", part_size, progress=progress) as asked, asked.step("answers", n):
            texts = []
            for start in range(0, n, batch):
                texts += [g.text for g in asked([msgs(i) for i in range(start, min(start + batch, n))], PARAMS)]
        return {"data": pa.table({"text": texts})}

    return Stage("ask", run)


def run_stage(path: Path, stage: Stage, max_error_share: float = 0.0):
    runner = StageRunner(RunDir(str(path)), on_stage=lambda *a: None, max_error_share=max_error_share)
    return runner.run_stage(stage), runner


def parts(path: Path) -> list[Path]:
    folder = path / "stages" / "ask.parts"
    return sorted(folder.glob("*.parquet")) if folder.exists() else []


def test_failed_prompts_are_retried_and_nothing_else(tmp_path):
    chat = FlakyChat(failing={"prompt 2", "prompt 7", "prompt 8"})
    rec, runner = run_stage(tmp_path, llm_stage(chat, 12, batch=5))
    assert rec.incomplete == "3 of 12 LLM prompts failed"
    assert runner.output("ask").column("text").to_pylist()[2] == ""  # this run goes on with what it has
    chat.failing.clear()
    chat.asked.clear()
    rec, runner = run_stage(tmp_path, llm_stage(chat, 12, batch=4))  # another batching: reuse is per prompt
    assert sorted(chat.asked) == ["prompt 2", "prompt 7", "prompt 8"] and not rec.incomplete
    assert runner.output("ask").column("text").to_pylist() == [f"re prompt {i}" for i in range(12)]
    chat.asked.clear()
    rec, _ = run_stage(tmp_path, llm_stage(chat, 12, batch=4))
    assert rec.skipped and chat.asked == []


def test_failures_under_the_allowed_share_leave_the_stage_done(tmp_path):
    chat = FlakyChat(failing={"prompt 1"})
    rec, _ = run_stage(tmp_path, llm_stage(chat, 10, batch=10), max_error_share=0.2)
    assert rec.incomplete is None


def test_an_answer_is_keyed_by_model_params_and_messages():
    base = prompt_key("m", PARAMS, msgs(1))
    assert base == prompt_key("m", PARAMS.model_copy(), [dict(x) for x in msgs(1)])
    assert base != prompt_key("m2", PARAMS, msgs(1))
    assert base != prompt_key("m", PARAMS.model_copy(update={"seed": 4}), msgs(1))
    assert base != prompt_key("m", PARAMS, msgs(2))


def test_parts_are_few_and_duplicates_asked_once(tmp_path):
    chat = FlakyChat()

    def run(ctx):
        with StageChat(chat, ctx, "model-x", part_size=25) as asked:
            for start in range(0, 100, 5):
                asked([msgs(i) for i in range(start, start + 5)], PARAMS)
            again = asked([msgs(0), msgs(0)], PARAMS)
        return {"data": pa.table({"text": [g.text for g in again]})}

    rec, runner = run_stage(tmp_path, Stage("ask", run))
    assert len(parts(tmp_path)) == 4 and len(chat.asked) == 100
    assert runner.output("ask").column("text").to_pylist() == ["re prompt 0"] * 2


def test_progress_counts_every_prompt(tmp_path):
    seen = []

    class Recorder:
        def __init__(self, label, total):
            seen.append([label, total, 0])

        def __enter__(self):
            return lambda n: seen[-1].__setitem__(2, seen[-1][2] + n)

        def __exit__(self, *exc):
            return None

    run_stage(tmp_path, llm_stage(FlakyChat({"prompt 3"}), 9, batch=4, progress=Recorder))
    assert seen == [["answers", 9, 9]]


def test_a_fatal_error_keeps_the_answers_so_far(tmp_path):
    class DiesAfter(FlakyChat):
        def __call__(self, messages_list, params):
            if len(self.asked) >= 6:
                raise LLMError("LLM endpoint http://x: stopped, 8 requests in a row failed")
            return super().__call__(messages_list, params)

    chat = DiesAfter()
    with pytest.raises(LLMError):
        run_stage(tmp_path, llm_stage(chat, 12, batch=3))
    assert not (tmp_path / "stages" / "ask").exists()  # nothing committed as the stage's result
    healthy = FlakyChat()
    run_stage(tmp_path, llm_stage(healthy, 12, batch=3))
    assert healthy.asked == [f"prompt {i}" for i in range(6, 12)]


def test_a_wrong_number_of_answers_is_an_error(tmp_path):
    with pytest.raises(LLMError, match="1 answers for 2 prompts"):
        run_stage(tmp_path, llm_stage(lambda m, p: [make_generation("x", "stop")], 2, batch=2))


SLOW_STAGE = """
import sys, time
import pyarrow as pa
from checkray.engine.llm import make_generation
from checkray.engine.stages import RunDir, Stage, StageRunner
from tests.llm.test_llm_checkpoint import llm_stage

class Slow:
    name = "slow"
    def __call__(self, messages_list, params):
        time.sleep(0.2)
        for m in messages_list:
            print(m[-1]["content"], flush=True)
        return [make_generation("re " + m[-1]["content"], "stop") for m in messages_list]

StageRunner(RunDir(sys.argv[1]), on_stage=lambda *a: None).run_stage(llm_stage(Slow(), 40, batch=2, part_size=2))
"""


@pytest.mark.timeout(120)
def test_sigkill_mid_stage_resumes_without_redoing_parts(tmp_path):
    script = tmp_path / "slow_stage.py"
    script.write_text(textwrap.dedent(SLOW_STAGE))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True, env=env)
    answered = []
    for line in proc.stdout:  # kill it once a few batches are committed
        answered.append(line.strip())
        if len(parts(out)) >= 3:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    committed = len(parts(out))
    assert 3 <= committed < 20
    chat = FlakyChat()
    rec, runner = run_stage(out, llm_stage(chat, 40, batch=2, part_size=2))
    assert len(chat.asked) == 40 - 2 * committed  # every committed batch is reused
    assert runner.output("ask").column("text").to_pylist() == [f"re prompt {i}" for i in range(40)]


def test_answers_of_older_code_are_reused_and_recommitted(tmp_path):
    """A code change reruns the stage but asks no prompt again: an answer is keyed by what
    it depends on. The reused answers move to parts of the new code, the old parts go."""
    first = FlakyChat(failing={"prompt 4"})
    rec, _ = run_stage(tmp_path, llm_stage(first, 6, batch=2, part_size=2), max_error_share=0.5)
    old = parts(tmp_path)
    assert first.asked == [f"prompt {i}" for i in range(6)] and old

    chat = FlakyChat()
    # a new version changes the stage's code digest, as an edit of its code does
    stage = replace(llm_stage(chat, 6, batch=3), version="2")
    rec2, runner = run_stage(tmp_path, stage)
    assert chat.asked == ["prompt 4"], "only the prompt without an answer is asked"
    assert rec2.code != rec.code and not rec2.incomplete
    texts = runner.output("ask").column("text").to_pylist()
    assert texts == [f"re prompt {i}" for i in range(6)]
    new = parts(tmp_path)
    assert not set(old) & set(new), "the old code's parts are pruned once the stage completes"
    assert all(p.stem.endswith(rec2.code[:8]) for p in new)

    again = FlakyChat()
    run_stage(tmp_path, replace(llm_stage(again, 6, batch=6), version="3"))
    assert again.asked == [], "the answers survived the move to the second code's parts"
