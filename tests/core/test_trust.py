"""Inputs that run code are refused without --trust-code: unsigned pickles, callable
models, trust_remote_code. Pickles checkray wrote for this user load without it."""

from __future__ import annotations

import os

import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.trust import SIGNATURE_SUFFIX, TRUST_ENV, load_pickle, pickle_bytes


@pytest.fixture
def untrusted(monkeypatch, tmp_path):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    monkeypatch.setenv("CHECKRAY_CACHE", str(tmp_path / "cache"))  # a fresh per-user key


class Boom:
    """Unpickling this would run ``os.system``: the refusal must come before."""

    def __reduce__(self):
        import os

        return (os.system, ("touch boom-marker",))


def test_unsigned_pickle_is_refused_and_not_run(untrusted, tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "model.joblib"
    path.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(InputError, match="pickle that checkray did not write.*--trust-code"):
        load_pickle(path, "model 'x'")
    assert not (tmp_path / "boom-marker").exists()


def test_signed_pickle_loads_and_an_edited_one_does_not(untrusted, tmp_path):
    data, signature = pickle_bytes({"weights": [1, 2, 3]})
    path = tmp_path / "head.joblib"
    path.write_bytes(data)
    (tmp_path / ("head.joblib" + SIGNATURE_SUFFIX)).write_text(signature)
    assert load_pickle(path, "head") == {"weights": [1, 2, 3]}
    other, _ = pickle_bytes({"weights": [6, 6, 6]})
    path.write_bytes(other)  # replaced after signing
    with pytest.raises(InputError, match="did not write"):
        load_pickle(path, "head")


def test_signature_from_another_key_is_not_trusted(untrusted, tmp_path, monkeypatch):
    data, signature = pickle_bytes([1])
    monkeypatch.setenv("CHECKRAY_CACHE", str(tmp_path / "someone-else"))
    path = tmp_path / "m.joblib"
    path.write_bytes(data)
    (tmp_path / ("m.joblib" + SIGNATURE_SUFFIX)).write_text(signature)
    with pytest.raises(InputError):
        load_pickle(path, "m")


def test_trust_flag_allows_unsigned_pickles(monkeypatch, tmp_path):
    import joblib

    monkeypatch.setenv(TRUST_ENV, "1")
    joblib.dump({"a": 1}, tmp_path / "x.joblib")
    assert load_pickle(tmp_path / "x.joblib", "x") == {"a": 1}


def test_callable_model_needs_trust(untrusted):
    from checkray.actors.models.callable_model import load_callable

    spec = ModelSpec(name="kw", family="callable", path="tests.fakes.models:keyword_sentiment")
    with pytest.raises(InputError, match="callable imports the module.*--trust-code"):
        load_callable(spec)


def test_trust_remote_code_needs_trust(untrusted, tmp_path):
    from checkray.actors.models.hf_model import load_hf

    (tmp_path / "config.json").write_text("{}")
    spec = ModelSpec(name="remote", family="hf", path=str(tmp_path), labels=["a", "b"], trust_remote_code=True)
    with pytest.raises(InputError, match="trust_remote_code.*--trust-code"):
        load_hf(spec)


def test_cli_flag_sets_the_switch(untrusted):
    import os

    from tests.fakes.cli import run_cli

    assert run_cli("--trust-code", "zoo", "--help") == 0  # the group's option runs before the command
    assert os.environ.get(TRUST_ENV) == "1"
    os.environ.pop(TRUST_ENV)


def test_switches_set_after_ray_started_travel_with_the_actors(monkeypatch):
    """A local Ray's workers keep the environment of its start: trust (or an encoder)
    turned on later reaches an actor only through its runtime_env, and one turned off
    travels as an empty value; nothing changed means no runtime_env (idle workers reused)."""
    from checkray.engine import runtime
    from checkray.engine.inference import ENCODER_ENV

    monkeypatch.delenv(ENCODER_ENV, raising=False)
    monkeypatch.delenv(TRUST_ENV, raising=False)
    monkeypatch.setattr(runtime, "_WORKER_ENV_AT_START", {})
    plan = runtime.ActorPlan(device="cpu", pool_size=1, num_cpus=1.0, num_gpus=0.0, threads=1)
    assert plan.ray_options() == {"num_cpus": 1.0}
    monkeypatch.setenv(TRUST_ENV, "1")
    assert plan.ray_options() == {"num_cpus": 1.0, "runtime_env": {"env_vars": {TRUST_ENV: "1"}}}
    monkeypatch.setattr(runtime, "_WORKER_ENV_AT_START", {TRUST_ENV: "1", ENCODER_ENV: "onnx"})
    assert runtime.late_switches_env() == {"runtime_env": {"env_vars": {TRUST_ENV: "1", ENCODER_ENV: ""}}}
    monkeypatch.delenv(TRUST_ENV)
    assert runtime.late_switches_env() == {"runtime_env": {"env_vars": {TRUST_ENV: "", ENCODER_ENV: ""}}}


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_callable_model_is_refused_inside_the_ray_worker_without_trust(ray_session, tmp_path):
    """The session's Ray runs with trust off, as a user's does without --trust-code: the
    model host (a Ray actor) refuses to import the callable's module, and says why."""
    import pyarrow.parquet as pq

    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.schema import make_cases
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import CheckrayConfig

    assert os.environ.get(TRUST_ENV) is None
    spec = ModelSpec(name="kw", family="callable", path="tests.fakes.models:keyword_sentiment")
    cases = make_cases(
        [
            {
                "suite": "s",
                "method": "templates",
                "capability": "Vocabulary",
                "text": "good",
                "expected_label": "positive",
            }
        ]
    )
    run_job(BenchmarkJob(CheckrayConfig(), [spec], [cases]), str(tmp_path / "run"))
    (row,) = pq.read_table(tmp_path / "run" / "models.parquet").to_pylist()
    assert "family callable imports the module" in row["error"] and "--trust-code" in row["error"]
