"""``checkray testaug`` with ``llm.backend: http`` against a misbehaving local server
(``tests/fakes/llm_server.py``): prompts that fail leave a partial run marked incomplete
and a rerun asks exactly them; a server that never answers stops the run with one line in
bounded time and leaves nothing half-written; malformed ``usage`` costs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkray.jobs.config import load_config
from checkray.jobs.testaug.job import run_testaug
from tests.fakes.cli import run_cli
from tests.fakes.llm_server import FaultyLLMServer
from tests.testaug.test_testaug_job import SPEC

pytestmark = pytest.mark.ray


def config_file(tmp_path: Path, server: FaultyLLMServer, **llm) -> Path:
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps(r) + "\n" for r in SPEC), encoding="utf-8")
    settings = {
        "backend": "http",
        "base_url": server.url,
        "model": "fake",
        "api_key_env": None,
        "requests_per_second": 1000,
        "max_retries": 2,
        "backoff_s": 0.01,
        "timeout_s": 1.0,
        "max_consecutive_failures": 1000,
        **llm,
    }
    testaug = {
        "spec": str(spec),
        "prompts_per_description": 3,
        "first_sample": 4,
        "baseline_nsamples": 5,
        "diversity_per_description": 10,
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"llm": settings, "testaug": testaug}), encoding="utf-8")  # JSON is YAML
    return path


def assert_nothing_half_written(out: Path) -> None:
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    for stage in (out / "stages").iterdir() if (out / "stages").exists() else ():
        if stage.is_dir() and not stage.name.endswith(".parts"):
            assert (stage / "_SUCCESS.json").exists(), stage


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["non_json", pytest.param("503", marks=pytest.mark.slow)])
def test_failed_prompts_give_a_partial_run_and_the_rerun_asks_only_them(ray_session, tmp_path, mode):
    out = tmp_path / "out"
    with FaultyLLMServer(mode, share=0.34) as server:
        cfg = load_config(config_file(tmp_path, server))
        run_testaug(cfg, str(out))
        failed, answered = server.prompts(ok=False), server.prompts(ok=True)
        failed_generate = server.prompts(ok=False, kind="generate")
        assert failed_generate and not failed & answered  # the server did fail some generation prompts
        manifest = json.loads((out / "manifest.json").read_text())
        note = json.loads((out / "stages/generate/_SUCCESS.json").read_text())["incomplete"]
        assert note == f"{len(failed_generate)} of 6 LLM prompts failed" and "generate" in manifest["incomplete"]
        assert (out / "suite.parquet").exists() and (out / "report.html").exists()  # what it has
        assert_nothing_half_written(out)

        server.mode = "ok"
        before = len(server.requests)
        run_testaug(cfg, str(out))
        asked_again = server.prompts(since=before)
        assert server.prompts(kind="generate", since=before) == failed_generate  # exactly the failed ones
        assert not asked_again & answered  # no prompt answered before is asked again
        assert json.loads((out / "manifest.json").read_text())["incomplete"] == {}
        assert_nothing_half_written(out)


@pytest.mark.timeout(300)
def test_a_server_that_never_answers_stops_the_run_in_one_line(ray_session, tmp_path, capsys):
    out = tmp_path / "out"
    with FaultyLLMServer("hang") as server:
        path = config_file(tmp_path, server, timeout_s=0.5, max_consecutive_failures=4, concurrency=2)
        code = run_cli("testaug", "--config", str(path), "--out", str(out))
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2 and err.startswith("error: LLM endpoint " + server.url), err
        assert "4 requests in a row failed" in err and "ReadTimeout" in err
        assert len(server.requests) <= 4 + 2  # bounded: the breaker, not max_retries x timeout_s per prompt
    assert not (out / "suite.parquet").exists() and not (out / "stages/generate").exists()
    assert_nothing_half_written(out)
    with FaultyLLMServer("ok") as healthy:  # the same run directory, a healthy server
        run_testaug(load_config(config_file(tmp_path, healthy)), str(out))
    assert (out / "suite.parquet").exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_malformed_usage_is_harmless(ray_session, tmp_path):
    with FaultyLLMServer("bad_usage") as server:
        result = run_testaug(load_config(config_file(tmp_path, server)), str(tmp_path / "out"))
        assert server.count() == server.count(ok=True) > 6
    assert json.loads((tmp_path / "out/manifest.json").read_text())["incomplete"] == {}
    assert result.table("suite.parquet").num_rows > 0
