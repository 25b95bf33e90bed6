"""Connecting to Ray and planning resources from what the cluster reports.

Two hangs shape this module (see docs/architecture.md): asking for a GPU that does not
exist waits forever, and an actor pool that takes every CPU starves Ray Data's read
tasks. So every plan is computed from ``ray.cluster_resources()`` first, and CPU pools
leave room for the data tasks.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checkray.engine.config import Backend, Device, RuntimeConfig
from checkray.engine.errors import ResourceError

log = logging.getLogger(__name__)


# CPUs left free for Ray Data read/repartition/write tasks (each asks for 1 CPU) when
# actors run on CPUs; with less, the pool waits forever for its input.
DATA_TASK_RESERVE = 1.0
# runtime.embed_in_driver_below, as set for this process and the workers it starts
# (read by checkray.actors.embed_cache)
EMBED_IN_DRIVER_ENV = "CHECKRAY_EMBED_IN_DRIVER_BELOW"


def init_ray(cfg: RuntimeConfig | None = None) -> str | None:
    """Join ``RAY_ADDRESS``/``cfg.address`` if given, else start a quiet local Ray; return
    the local Ray's temp dir (None when joining or already connected)."""
    import ray

    if ray.is_initialized():
        return None
    cfg = cfg or RuntimeConfig()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts workers 15 nice levels below the driver: on a busy machine every actor then
    # yields to other processes. Workers at the caller's own priority (the CLI sets it too).
    os.environ.setdefault("RAY_worker_niceness", "0")
    # Ray's tqdm_ray progress bars replace builtins.print for good once the first bar shows;
    # numba then cannot compile kernels that print (pynndescent's nn_descent calls
    # numba.get_num_threads, whose implementation does): a fresh install's first UMAP
    # layout failed with "Untyped global name 'print'".
    os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
    if cfg.trust_code:
        from checkray.engine.trust import allow_code

        allow_code()
    from checkray.engine.inference import ENCODER_ENV, set_encoder

    if cfg.encoder != "auto" and not os.environ.get(ENCODER_ENV):  # --encoder wins
        set_encoder(cfg.encoder)
    os.environ.setdefault(EMBED_IN_DRIVER_ENV, str(cfg.embed_in_driver_below))
    workers_print_to_stderr()
    address = os.environ.get("RAY_ADDRESS") or cfg.address
    if address:
        log.info("connecting to Ray at %s", address)
        ray.init(address=address, log_to_driver=True, runtime_env=worker_env() or None)
        remember_worker_env()
        if cfg.request_gpus:
            scale_up_gpus(cfg.request_gpus, cfg.gpu_wait_s)
        return None
    keep_on_loopback(ray)
    temp_dir = start_local_ray(cfg)
    remember_worker_env()  # a local Ray's workers inherit this process's environment
    remove_at_exit(temp_dir)
    if os.environ.get("RAY_AUTH_MODE", "token") != "token":
        log.warning("RAY_AUTH_MODE=%s: the local Ray accepts unauthenticated calls", os.environ["RAY_AUTH_MODE"])
    return temp_dir


WORKER_STDOUT_HANDLER = "checkray_worker_stdout_to_stderr"


def _as_stderr(batch: dict) -> None:
    batch["is_err"] = True  # the handlers after this one see the batch as stderr


def workers_print_to_stderr() -> None:
    """The lines Ray forwards from its workers' stdout are printed to the driver's stderr,
    like their stderr: both are diagnostics, and stderr is where the CLI and the notebook
    API (``jobs/runlog.py``) keep them out of sight, in the run's log. Ray prints a
    worker's stdout to ``sys.stdout``, which in a notebook is the cell's output. The
    handler runs first on Ray's dispatcher of worker lines and marks each batch stderr."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    dispatcher.remove_handler(WORKER_STDOUT_HANDLER)
    with dispatcher._lock:
        dispatcher.handlers.insert(0, (WORKER_STDOUT_HANDLER, _as_stderr))


# Starting a local Ray on a loaded machine can outlast Ray's own fixed 30 s wait for its
# node to register (its agent process is slow to import): start again, in a fresh
# directory, before giving up with one line.
LOCAL_START_ATTEMPTS = 3
# The raylet waits this long for its agent before it gives up (Ray's default is shorter
# than the agent takes to start at a load of 15-20 on 2 cores).
AGENT_REGISTER_TIMEOUT_MS = "120000"


def start_local_ray(cfg: RuntimeConfig, attempts: int = LOCAL_START_ATTEMPTS) -> str:
    """Start a quiet local Ray in a fresh short temp dir (a dead cluster's
    ``ray_current_cluster`` file in a shared dir would make this join a cluster that no
    longer exists); return the dir. A start that times out is retried in a new dir."""
    import shutil

    import ray

    os.environ.setdefault("RAY_agent_register_timeout_ms", AGENT_REGISTER_TIMEOUT_MS)
    for attempt in range(1, attempts + 1):
        temp_dir = tempfile.mkdtemp(prefix="cr", dir=os.environ.get(TEMP_ROOT_ENV, "/tmp"))
        try:
            ray.init(
                num_cpus=cfg.num_cpus,
                num_gpus=cfg.num_gpus,
                include_dashboard=False,
                object_store_memory=cfg.object_store_mb * 1024 * 1024,
                _temp_dir=temp_dir,
                log_to_driver=True,
                configure_logging=False,
                runtime_env=worker_env(),
            )
            return temp_dir
        except Exception as exc:  # Ray raises a bare Exception when its node does not come up
            if "timed out during startup" not in str(exc):
                raise
            ray.shutdown()
            shutil.rmtree(temp_dir, ignore_errors=True)
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            log.warning("local Ray did not start (attempt %d of %d, load average %.1f)", attempt, attempts, load)
            if attempt == attempts:
                raise ResourceError(
                    f"a local Ray did not start in {attempts} attempts (its node timed out during startup; "
                    f"load average {load:.1f}): retry when the machine is less busy, or join a running "
                    "cluster with RAY_ADDRESS"
                ) from None
            time.sleep(2.0 * attempt)
    raise AssertionError("unreachable")


# Set to keep a local Ray's session directory (its logs) after the process exits.
KEEP_TEMP_ENV = "CHECKRAY_KEEP_RAY_TEMP"
# Where local Rays make their directories (default /tmp: Ray's socket paths must stay under
# 108 bytes). The tests point it at a directory of their own, which also collects those of
# commands they kill, whose exit hooks never run.
TEMP_ROOT_ENV = "CHECKRAY_RAY_TEMP_ROOT"


def remove_at_exit(temp_dir: str) -> None:
    """Every local run's session directory (logs, sockets: ~6.5 MB) would otherwise stay in
    /tmp for good, one per command. Registered after ``ray.init``, so it runs before Ray's
    own exit hook: shut Ray down, then remove the directory."""
    import atexit
    import shutil

    def _remove() -> None:
        import ray

        if os.environ.get(KEEP_TEMP_ENV):
            log.info("kept the local Ray's directory %s (%s is set)", temp_dir, KEEP_TEMP_ENV)
            return
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)

    atexit.register(_remove)


# Ray reads this switch when its modules are imported; it is what keeps a local Ray on
# 127.0.0.1 on macOS/Windows, and it does the same on Linux (docs/cluster.md, SECURITY.md).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def secure_process_env() -> None:
    """Before Ray is imported (the CLI calls this first): token auth on explicitly. Ray
    reads RAY_AUTH_MODE at import, so setting it later has no effect on this process."""
    os.environ.setdefault("RAY_AUTH_MODE", "token")


def keep_on_loopback(ray) -> None:
    """A local Ray started by this process listens on 127.0.0.1 only: its processes (which
    import Ray afresh) read the environment, this one the already imported constant."""
    os.environ[LOOPBACK_ENV] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False


def worker_env_vars() -> dict[str, str]:
    """The switches every Ray worker of the job must see as this process sees them now:
    the trust switch (engine/trust.py) and the encoder runtime (engine/inference.py)."""
    from checkray.engine.inference import ENCODER_ENV
    from checkray.engine.trust import TRUST_ENV, code_trusted

    env = {TRUST_ENV: "1"} if code_trusted() else {}
    if os.environ.get(ENCODER_ENV):
        env[ENCODER_ENV] = os.environ[ENCODER_ENV]
    return env


def worker_env() -> dict:
    """Runtime environment every Ray worker of the job gets (on any node)."""
    env = worker_env_vars()
    return {"env_vars": env} if env else {}


# The switches the workers of the Ray this process started or joined were given then
# (None: Ray was started by someone else, so nothing is known of its workers).
_WORKER_ENV_AT_START: dict[str, str] | None = None


def remember_worker_env() -> None:
    global _WORKER_ENV_AT_START
    _WORKER_ENV_AT_START = worker_env_vars()


def late_switches_env() -> dict:
    """A ``runtime_env`` for an actor when a switch changed after Ray started (a notebook
    that turns ``--trust-code`` on after its first job; a test that trusts the models it
    wrote): Ray's workers keep the environment of their start, so the switches then travel
    with the actor. Empty when nothing changed, so actors keep using Ray's idle workers."""
    now, then = worker_env_vars(), _WORKER_ENV_AT_START or {}
    if now == then:
        return {}
    # A switch turned off travels as "" (Ray cannot unset a variable a worker inherited).
    gone = {k: "" for k in then if k not in now}
    return {"runtime_env": {"env_vars": {**gone, **now}}}


def await_resources(
    resource: str,
    wanted: float,
    poll: Callable[[], Mapping[str, float]],
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    interval_s: float = 5.0,
) -> float:
    """Poll ``poll()`` until it reports ``wanted`` of ``resource`` or ``timeout_s`` passes;
    return the amount last seen (pure given its callables; tested with fakes)."""
    deadline = clock() + timeout_s
    while True:
        have = float(poll().get(resource, 0))
        if have >= wanted or clock() >= deadline:
            return have
        sleep(min(interval_s, max(deadline - clock(), 0.0)))


def scale_up_gpus(count: int, wait_s: float) -> float:
    """Ask the autoscaler for ``count`` one-GPU bundles and wait for them to join.

    Plans are made from the resources Ray reports *now*; on a cluster whose GPU workers
    scale from zero they would otherwise plan for CPUs only. If the GPUs do not arrive in
    time the job goes on with what there is (and says so). The request persists in the
    cluster until cleared, so it is cleared three ways: when the driver exits normally
    (``atexit``; the CLI turns SIGTERM, e.g. ``ray job stop``, into a normal exit), and by
    a detached ``RequestGuard`` actor that clears it when the driver's job is dead, which
    covers a SIGKILLed driver: idle GPU nodes then scale back down instead of billing.
    """
    import atexit

    import ray
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=[{"GPU": 1}] * count)
    start_request_guard(ray.get_runtime_context().get_job_id())
    atexit.register(lambda: ray.is_initialized() and request_resources(num_cpus=0))
    have = await_resources("GPU", count, lambda: ray.cluster_resources(), wait_s)
    if have < count:
        log.warning(
            "asked the autoscaler for %d GPUs, %g arrived within %.0f s: planning with those", count, have, wait_s
        )
    return have


def job_is_over(jobs: list[dict], job_id: str) -> bool:
    """True when GCS's job table says ``job_id`` is dead or no longer lists it (pure)."""
    for job in jobs:
        if str(job.get("JobID")) == job_id:
            return bool(job.get("IsDead"))
    return True


def clear_resource_request() -> None:
    from ray.autoscaler.sdk import request_resources

    request_resources(num_cpus=0)


class RequestGuard:
    """A detached, CPU-free actor that outlives the driver: it polls the job table and,
    once the driver's job is over, runs ``release`` (clear the autoscaler request) and
    ends itself. ``release`` is injectable so a test can watch it fire.

    The watch starts in ``__init__`` on a thread, not in a method the driver calls: a
    detached actor's creation is owned by GCS, but a method call waits in the caller's
    process until the actor is up, so a driver killed while the actor's worker was still
    starting (seconds on a loaded machine) would leave a guard that never watches. A
    restarted guard (``max_restarts``) watches again for the same reason."""

    def __init__(self, job_id: str, interval_s: float = 10.0, release: Callable[[], None] = clear_resource_request):
        import threading

        self.job_id, self.interval_s, self.release = job_id, interval_s, release
        threading.Thread(target=self._watch, name="checkray-request-guard", daemon=True).start()

    def _watch(self) -> None:
        import ray
        from ray._private.state import jobs

        while not job_is_over(jobs(), self.job_id):
            time.sleep(self.interval_s)
        self.release()
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def ready(self) -> bool:
        return True


def start_request_guard(
    job_id: str,
    interval_s: float = 10.0,
    release: Callable[[], None] = clear_resource_request,
    ready_timeout_s: float = 120.0,
) -> object:
    """Start the ``RequestGuard`` of ``job_id`` (see ``scale_up_gpus``) and wait, at most
    ``ready_timeout_s``, until it is up and watching; returns its handle."""
    import ray

    guard = (
        ray.remote(RequestGuard)
        .options(num_cpus=0, lifetime="detached", max_restarts=3)
        .remote(job_id, interval_s, release)
    )
    try:
        ray.get(guard.ready.remote(), timeout=ready_timeout_s)
    except ray.exceptions.GetTimeoutError:
        log.warning("the autoscaler request guard did not start within %.0f s", ready_timeout_s)
    return guard


def wait_for(ref, timeout_s: float, what: str):
    """``ray.get(ref)`` bounded by ``timeout_s``: a hung task or actor is a one-line
    ``ResourceError`` naming ``what`` (the task is cancelled), never an endless wait."""
    import ray

    try:
        return ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        raise ResourceError(f"{what} did not finish within {timeout_s:.0f} s (runtime.task_timeout_s)") from None


def planned_resources(cfg: RuntimeConfig) -> str:
    """What a job would run on, without starting Ray (``--dry-run``)."""
    address = os.environ.get("RAY_ADDRESS") or cfg.address
    if address:
        gpus = f", asking the autoscaler for {cfg.request_gpus} GPU(s)" if cfg.request_gpus else ""
        return f"the Ray cluster at {address} (its CPUs and GPUs as it reports them{gpus})"
    cpus = cfg.num_cpus or os.cpu_count() or 1
    gpus = cfg.num_gpus or 0
    plan = plan_actor_pool({"CPU": cpus, "GPU": gpus})
    return (
        f"a local Ray with {cpus} CPU(s) and {gpus} GPU(s); model actors on {plan.device}, "
        f"{plan.pool_size} per pool, {plan.num_cpus:g} CPU(s) and {plan.threads} thread(s) each"
    )


def cluster_resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())


def alive_node_count() -> int:
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive"))


def driver_node_cpus() -> float:
    """The CPUs Ray's node of this process offers. A cluster head started with
    ``--num-cpus=0`` (cluster.yaml) offers none: work that would run in the driver there
    belongs on the workers."""
    import ray

    me = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == me), None)
    return float((node or {}).get("Resources", {}).get("CPU", 0))


@dataclass(frozen=True)
class ActorPlan:
    """How to run a pool of model-holding actors: size, per-actor resources, threads."""

    device: Device
    pool_size: int
    num_cpus: float
    num_gpus: float
    threads: int  # torch intra-op threads inside each actor
    # Small CPU work on a one-node local Ray: the model runs in this process instead
    # (``checkray.actors.embed_cache.cluster_plan``), with ``threads`` for the whole node.
    in_driver: bool = False

    def ray_options(self) -> dict:
        """Options for ``.options()`` / ``map_batches``: resources, and the switches set
        after Ray started (``late_switches_env``)."""
        opts: dict = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            opts["num_gpus"] = self.num_gpus
        return {**opts, **late_switches_env()}


def plan_actor_pool(
    resources: Mapping[str, float],
    backend: Backend = "auto",
    pool_size: int | None = None,
    gpu_fraction: float = 1.0,
) -> ActorPlan:
    """Plan an actor pool from reported resources (pure: tested with plain dicts).

    GPU when the cluster reports one and the backend allows it; never a GPU request on a
    cluster without GPUs. On CPUs, actors share the CPUs minus a reserve for data tasks.
    """
    cpus = float(resources.get("CPU", 0))
    gpus = float(resources.get("GPU", 0))
    if cpus <= 0:
        raise ResourceError("Ray reports no CPUs: cannot plan any work")
    if backend == "gpu" and gpus <= 0:
        raise ResourceError("backend 'gpu' was requested but Ray reports no GPU in the cluster")
    if gpus > 0 and backend != "cpu":
        per_gpu = max(1, int(round(1 / gpu_fraction)))
        size = pool_size or max(1, int(gpus) * per_gpu)
        return ActorPlan("gpu", size, num_cpus=1.0 if cpus >= size + 1 else 0.5, num_gpus=gpu_fraction, threads=1)
    usable = max(cpus - DATA_TASK_RESERVE, 0.5)
    size = pool_size or 1  # on few CPUs, one actor with every thread beats many small ones
    per_actor = usable / size
    threads = max(1, int(cpus // size))
    return ActorPlan("cpu", size, num_cpus=round(per_actor, 3), num_gpus=0.0, threads=threads)


def choose_device(backend: Backend, resources: Mapping[str, float]) -> Device:
    """Device for driver-side numeric work (UMAP, k-means): GPU only if reported and allowed."""
    has_gpu = float(resources.get("GPU", 0)) > 0
    if backend == "gpu" and not has_gpu:
        raise ResourceError("backend 'gpu' was requested but Ray reports no GPU in the cluster")
    return "gpu" if has_gpu and backend != "cpu" else "cpu"
