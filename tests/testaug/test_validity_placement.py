"""Where `checkray validity train` fine-tunes: a one-GPU Ray task on a cluster that reports
a GPU (the selection is pure and tested with dicts; the task itself runs here on a CPU),
else in the command's own process without starting Ray."""

from __future__ import annotations

import numpy as np
import pytest

from checkray.engine.config import RuntimeConfig
from checkray.engine.errors import InputError
from checkray.engine.runtime import ActorPlan
from checkray.engine.testaug.config import ValidityConfig
from checkray.engine.training import FineTuneConfig
from checkray.jobs.testaug.validity import cluster_gpu_plan, train_on_cluster, training_plan

TINY = FineTuneConfig(train_size=None, epochs=20, max_length=16, batch_size=8, learning_rate=5e-3, warmup_ratio=0.0)
VALID = ["No one enjoys that flight.", "Nobody likes the food.", "I never liked the pilot.", "No one admires it."]
INVALID = ["The flight was amazing.", "What a wonderful crew!", "I love this airline.", "The seat is great."]


def test_a_fine_tune_takes_one_gpu_only_where_the_cluster_reports_one():
    plan = training_plan("finetune", {"CPU": 16.0, "GPU": 4.0})
    assert plan is not None and plan.device == "gpu" and plan.ray_options()["num_gpus"] == 1.0
    assert training_plan("finetune", {"CPU": 16.0}) is None  # no GPU: never a GPU request (it would hang)
    assert training_plan("finetune", {"CPU": 16.0, "GPU": 0.0}) is None
    assert training_plan("embedding_lr", {"CPU": 16.0, "GPU": 4.0}) is None  # seconds anywhere


def test_without_a_cluster_address_no_ray_is_started(monkeypatch):
    import checkray.jobs.testaug.validity as module

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(module, "init_ray", lambda *a, **k: pytest.fail("started Ray for a local fine-tune"))
    assert cluster_gpu_plan("finetune", RuntimeConfig()) is None
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert cluster_gpu_plan("embedding_lr", RuntimeConfig()) is None


@pytest.mark.timeout(300)
def test_the_task_returns_a_classifier_the_driver_can_use(ray_session, tmp_path):
    from checkray.actors.testaug.validity import ValidityClassifier
    from tests.fakes.tiny_hf import build_tiny_bert

    base = str(build_tiny_bert(tmp_path / "tiny", VALID + INVALID))
    rows = [{"text": t, "validity": 1} for t in VALID] + [{"text": t, "validity": 0} for t in INVALID]
    plan = ActorPlan("cpu", 1, num_cpus=1.0, num_gpus=0.0, threads=1)  # the GPU plan's task, on a CPU
    config = ValidityConfig(backend="finetune", encoder=base, seed=0, finetune=TINY)
    clf = train_on_cluster(plan, rows, config, 240)
    probs = clf.predict_proba([r["text"] for r in rows])
    assert ((probs >= 0.5) == np.array([r["validity"] for r in rows])).mean() >= 0.75
    clf.save(str(tmp_path / "clf"))
    assert ValidityClassifier.load(str(tmp_path / "clf")).backend == "finetune"
    only_valid = [{"text": t, "validity": 1} for t in VALID]
    with pytest.raises(InputError, match="need valid and invalid cases"):
        train_on_cluster(plan, only_valid, config, 240)
