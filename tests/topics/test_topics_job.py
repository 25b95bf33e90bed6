"""The topics job end to end on real sentences, its resume, its CLI errors, its GPU branch."""

import json
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

from checkray.jobs.topics.job import run_topics
from tests.conftest import TOPICS_DOCS as N_DOCS

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def topics_run(topics_run_2000):
    return topics_run_2000


@pytest.mark.timeout(420)
def test_outputs_have_the_contracted_shape(topics_run):
    _, out = topics_run
    clusters = pq.read_table(out / "clusters.parquet")
    assignments = pq.read_table(out / "assignments.parquet")
    reps = pq.read_table(out / "representatives.parquet")
    assert {"cluster", "size", "keywords", "topic"} <= set(clusters.column_names)
    assert clusters.num_rows == 4 and sum(clusters.column("size").to_pylist()) == N_DOCS
    assert assignments.column_names == ["id", "cluster", "x", "y"] and assignments.num_rows == N_DOCS
    assert len(set(assignments.column("id").to_pylist())) == N_DOCS
    assert {"cluster", "rank", "id", "text", "label"} <= set(reps.column_names)
    for row in clusters.to_pylist():
        assert row["topic"].startswith(f"{row['cluster']}_") and len(row["keywords"]) >= 4
    # stratified: each cluster's picks follow its label proportions (within rounding)
    labels = dict(
        zip(
            pq.read_table(out / "stages/corpus/data.parquet").column("id").to_pylist(),
            pq.read_table(out / "stages/corpus/data.parquet").column("label").to_pylist(),
        )
    )
    by_cluster = {}
    for doc, cluster in zip(assignments.column("id").to_pylist(), assignments.column("cluster").to_pylist()):
        by_cluster.setdefault(cluster, []).append(labels[doc])
    for cluster, members in by_cluster.items():
        picks = [r["label"] for r in reps.to_pylist() if r["cluster"] == cluster]
        assert len(picks) == 6
        share = members.count("positive") / len(members)
        assert abs(picks.count("positive") - 6 * share) <= 1
    html = (out / "report.html").read_text()
    assert "2-D map by topic and by label" in html and clusters.column("topic")[0].as_py() in html


@pytest.mark.timeout(300)
def test_rerun_resumes_from_checkpoints_with_identical_output(topics_run):
    cfg, out = topics_run
    before = pq.read_table(out / "assignments.parquet")
    reps_before = pq.read_table(out / "representatives.parquet")
    marker = json.loads((out / "stages/layout/_SUCCESS.json").read_text())
    os.remove(out / "stages/describe/_SUCCESS.json")  # as if the job died in the last stage
    result = run_topics(cfg, str(out))
    assert json.loads((out / "stages/layout/_SUCCESS.json").read_text()) == marker  # not recomputed
    assert result.stages["layout"].skipped and not result.stages["describe"].skipped
    assert result.table("assignments.parquet").equals(before)
    assert result.table("representatives.parquet").equals(reps_before)


def _cli(*args, cwd=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "checkray.jobs.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=240,
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "args,message",
    [
        (["--clusters", "5", "--limit", "3"], "3 documents but 5 clusters requested"),
        (["--clusters", "2", "--limit", "20", "--config", "MODEL"], "model path does not exist"),
    ],
)
def test_cli_errors_are_one_line_and_leave_no_outputs(tmp_path, args, message):
    if "MODEL" in args:
        cfg = tmp_path / "c.yaml"
        cfg.write_text("topics:\n  embedder:\n    model: ./no/such/model\n")
        args = [a if a != "MODEL" else str(cfg) for a in args]
    out = tmp_path / "out"
    res = _cli("topics", "--corpus", "builtin:rotten_tomatoes", *args, "--out", str(out))
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], res.stderr[-2000:]
    assert not (out / "clusters.parquet").exists() and not (out / "report.html").exists()


@pytest.mark.timeout(300)
def test_gpu_branch_schedules_gpu_actors_when_ray_reports_a_gpu(tmp_path):
    """ray.init(num_gpus=1) on a CPU machine fakes a GPU: the plan must use it, the
    embedding actor must be scheduled with num_gpus and still run (torch picks CPU)."""
    script = textwrap.dedent("""
        import os, ray, ray.data, tempfile
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, object_store_memory=128*1024*1024,
                 _temp_dir=tempfile.mkdtemp(prefix="crg", dir=os.environ.get("CHECKRAY_RAY_TEMP_ROOT", "/tmp")))
        from checkray.engine.runtime import plan_actor_pool, cluster_resources, choose_device
        from checkray.actors.embedder import EmbeddingActor
        plan = plan_actor_pool(cluster_resources())
        assert plan.device == "gpu" and plan.ray_options()["num_gpus"] == 1.0, plan
        assert choose_device("auto", cluster_resources()) == "gpu"
        ds = ray.data.from_items([{"id": str(i), "text": f"sentence {i}"} for i in range(8)])
        out = ds.map_batches(EmbeddingActor, fn_constructor_kwargs={"model": "builtin:minilm"},
                             batch_format="pyarrow", batch_size=4,
                             compute=ray.data.ActorPoolStrategy(size=plan.pool_size), **plan.ray_options())
        rows = out.take_all()
        assert len(rows) == 8 and len(rows[0]["embedding"]) == 384
        print("GPU-PLAN-OK")
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240)
    assert "GPU-PLAN-OK" in res.stdout, res.stderr[-3000:]


@pytest.mark.timeout(300)
def test_the_map_epochs_change_the_map_and_not_the_clusters(topics_run):
    """``topics.reducer.map_epochs`` sets the epochs of the 2-D map's UMAP only: the
    clusters come from the n-D layout and stay the same document for document."""
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import fit_layout
    from tests.conftest import TOPICS_DOCS

    cfg, out = topics_run
    layout = pq.read_table(out / "stages/layout/data.parquet")
    quick = load_config(
        None,
        {
            "corpus.sample": TOPICS_DOCS,
            "topics.clusterer.n_clusters": 4,
            "topics.representatives.top_k": 6,
            "topics.reducer.map_epochs": 20,
        },
    )
    relaid = fit_layout(str(out), quick, "cpu")
    assert relaid.column("pos").equals(layout.column("pos"))
    assert relaid.column("cluster").equals(layout.column("cluster"))
    assert relaid.column("x").to_pylist() != layout.column("x").to_pylist()
