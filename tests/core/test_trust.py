"""Inputs that run code are refused without --trust-code: unsigned pickles, callable
models, trust_remote_code. Pickles checkray wrote for this user load without it."""

from __future__ import annotations

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
