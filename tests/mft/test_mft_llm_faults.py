"""``checkray mft`` with ``llm.backend: http`` against a misbehaving local server
(``tests/fakes/llm_server.py``): failed prompts leave a partial run marked incomplete and
the rerun against a healthy server re-asks none of the answered prompts; a server that
never answers stops the run with one line and leaves nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkray.engine.llm import LLMError
from checkray.jobs.mft.job import run_mft
from tests.fakes.llm_server import FaultyLLMServer
from tests.mft.test_mft_job import _cfg, _embed
from tests.testaug.test_testaug_llm_faults import assert_nothing_half_written

pytestmark = pytest.mark.ray


def http_cfg(server: FaultyLLMServer, **llm):
    settings = {
        "llm.backend": "http",
        "llm.base_url": server.url,
        "llm.model": "fake",
        "llm.api_key_env": "CHECKRAY_TEST_NO_KEY",  # unset: no Authorization header
        "llm.requests_per_second": 1000,
        "llm.max_retries": 1,
        "llm.backoff_s": 0.01,
        "llm.timeout_s": 1.0,
        "llm.max_consecutive_failures": 1000,
        "mft.versions": 1,
        "mft.splits": ["test"],
    }
    return _cfg(**{**settings, **{f"llm.{k}": v for k, v in llm.items()}})


def generate_stage(out: Path) -> dict:
    return json.loads((out / "stages/generate-test-v1/_SUCCESS.json").read_text())


@pytest.mark.timeout(600)
def test_failed_prompts_give_a_partial_run_and_the_rerun_reuses_the_rest(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    out = tmp_path / "mft"
    with FaultyLLMServer("non_json", share=0.2) as server:
        cfg = http_cfg(server)
        run_mft(cfg, str(topics_dir), str(out), embed=_embed)
        failed, answered = server.prompts(ok=False), server.prompts(ok=True)
        assert failed and answered and not failed & answered
        note = generate_stage(out)["incomplete"]
        assert note.endswith("LLM prompts failed") and int(note.split()[0]) == len(failed)
        assert "generate-test-v1" in json.loads((out / "manifest.json").read_text())["incomplete"]
        assert (out / "suite.parquet").exists()
        assert_nothing_half_written(out)

        server.mode = "ok"
        before = len(server.requests)
        run_mft(cfg, str(topics_dir), str(out), embed=_embed)
        again = server.prompts(since=before)
        assert not again & answered  # every answered prompt came from the checkpoints
        assert again & failed  # the failed ones were asked again
        assert generate_stage(out)["incomplete"] is None
        assert json.loads((out / "manifest.json").read_text())["incomplete"] == {}


@pytest.mark.timeout(600)  # the first user of topics_run_2000 pays for the fixture
def test_a_server_that_never_answers_stops_the_run_in_one_line(topics_run_2000, tmp_path):
    _, topics_dir = topics_run_2000
    out = tmp_path / "mft"
    with FaultyLLMServer("hang") as server:
        cfg = http_cfg(server, timeout_s=0.5, max_consecutive_failures=3, concurrency=2)
        with pytest.raises(LLMError) as err:
            run_mft(cfg, str(topics_dir), str(out), embed=_embed)
        assert len(server.requests) <= 3 + 2
    message = str(err.value)
    assert message.startswith(f"LLM endpoint {server.url}: stopped, 3 requests in a row failed") and "\n" not in message
    assert not (out / "suite.parquet").exists() and not (out / "stages/generate-test-v1").exists()
    assert_nothing_half_written(out)
