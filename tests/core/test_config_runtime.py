"""Config validation errors name the field; resource planning never asks for a missing GPU."""

import pytest

from checkray.engine.errors import ConfigError, ResourceError
from checkray.engine.runtime import choose_device, plan_actor_pool
from checkray.jobs.config import load_config


def test_defaults_load_without_a_file():
    cfg = load_config(None)
    assert cfg.section("topics").clusterer.n_clusters == 5 and cfg.corpus.path == "builtin:rotten_tomatoes"


def test_unknown_field_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("topics:\n  clusterer:\n    n_clustres: 4\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert "topics.clusterer.n_clustres: unknown field" in str(err.value)
    assert "\n" not in str(err.value)


def test_wrong_type_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("topics:\n  representatives:\n    diversity: lots\n")
    with pytest.raises(ConfigError, match=r"topics\.representatives\.diversity"):
        load_config(p)


def test_unknown_section_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("topicz: {}\n")
    with pytest.raises(ConfigError, match="topicz: unknown section"):
        load_config(p)


@pytest.mark.parametrize(
    "text,match",
    [
        ("topics: [1, 2\n", "bad YAML"),
        ("- just\n- a list\n", "top level must be a mapping"),
    ],
)
def test_bad_yaml(tmp_path, text, match):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(p)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_win_over_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("topics:\n  clusterer:\n    n_clusters: 4\n")
    cfg = load_config(p, {"topics.clusterer.n_clusters": 7, "corpus.path": "x.csv", "corpus.limit": None})
    assert cfg.section("topics").clusterer.n_clusters == 7 and cfg.corpus.path == "x.csv" and cfg.corpus.limit is None


def test_cpu_plan_leaves_a_cpu_for_data_tasks():
    plan = plan_actor_pool({"CPU": 2.0})
    assert plan.device == "cpu" and plan.num_gpus == 0 and "num_gpus" not in plan.ray_options()
    assert plan.pool_size == 1 and plan.num_cpus <= 1.0 and plan.threads == 2
    plan4 = plan_actor_pool({"CPU": 8.0}, pool_size=3)
    assert plan4.pool_size == 3 and plan4.num_cpus * 3 <= 7.0


def test_gpu_plan_when_gpus_are_reported():
    plan = plan_actor_pool({"CPU": 16.0, "GPU": 4.0})
    assert plan.device == "gpu" and plan.pool_size == 4 and plan.ray_options()["num_gpus"] == 1.0
    half = plan_actor_pool({"CPU": 16.0, "GPU": 2.0}, gpu_fraction=0.5)
    assert half.pool_size == 4 and half.num_gpus == 0.5
    assert plan_actor_pool({"CPU": 16.0, "GPU": 4.0}, backend="cpu").device == "cpu"


def test_gpu_backend_without_gpu_is_an_error_not_a_hang():
    with pytest.raises(ResourceError, match="no GPU"):
        plan_actor_pool({"CPU": 2.0}, backend="gpu")
    with pytest.raises(ResourceError):
        choose_device("gpu", {"CPU": 2.0})
    assert choose_device("auto", {"CPU": 2.0}) == "cpu"
    assert choose_device("auto", {"CPU": 2.0, "GPU": 1.0}) == "gpu"


def test_await_resources_polls_until_the_gpus_join_or_time_runs_out():
    from checkray.engine.runtime import await_resources

    now = [0.0]
    reports = iter([{"CPU": 2}, {"CPU": 2, "GPU": 1}, {"CPU": 10, "GPU": 2}])
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    assert await_resources("GPU", 2, lambda: next(reports), 60, sleep, lambda: now[0], interval_s=5) == 2
    assert sleeps == [5, 5]
    now[0], sleeps[:] = 0.0, []
    assert await_resources("GPU", 2, lambda: {"CPU": 2}, 12, sleep, lambda: now[0], interval_s=5) == 0
    assert sleeps == [5, 5, 2] and now[0] == 12  # gave up at the deadline, not before
    assert await_resources("GPU", 1, lambda: {"GPU": 4}, 0, sleep, lambda: now[0]) == 4


def test_user_error_is_found_through_ray_style_wrappers():
    from checkray.engine.errors import InputError, user_error

    class Wrapper(Exception):  # Ray's RayTaskError carries the actor's exception as .cause
        def __init__(self, cause):
            super().__init__("wrapped")
            self.cause = cause

    inner = InputError("model.gguf: not found")
    assert user_error(Wrapper(Wrapper(inner))) is inner
    try:
        raise RuntimeError("outer") from inner
    except RuntimeError as exc:
        assert user_error(exc) is inner
    assert user_error(Wrapper(ValueError("bug"))) is None


@pytest.mark.timeout(120)
def test_wait_for_bounds_a_hung_task(ray_session):
    import time

    from checkray.engine.errors import ResourceError
    from checkray.engine.runtime import wait_for

    ref = ray_session.remote(lambda: time.sleep(600)).remote()
    start = time.monotonic()
    with pytest.raises(ResourceError, match="the test task did not finish within 2 s"):
        wait_for(ref, 2.0, "the test task")
    assert time.monotonic() - start < 30
    assert wait_for(ray_session.remote(lambda: 7).remote(), 60, "a quick task") == 7


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_ray_progress_bars_leave_print_alone_for_numba(tmp_path):
    """Ray's tqdm_ray bar manager replaces builtins.print unless told not to; numba then
    fails to compile kernels that print (a fresh install's first UMAP layout did)."""
    import subprocess
    import sys

    code = (
        "import builtins, os\n"
        "os.environ.pop('RAY_TQDM_PATCH_PRINT', None)\n"
        "original = builtins.print\n"
        "from checkray.engine.runtime import init_ray\n"
        "init_ray()\n"
        "from ray.experimental import tqdm_ray\n"
        "tqdm_ray.instance()\n"
        "import ray; ray.shutdown()\n"
        "original('kept' if builtins.print is original else 'replaced')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert proc.stdout.strip().splitlines()[-1] == "kept"
