"""Whole-dictionary nearest-neighbour distances on Ray actors (COSTELLO's thresholds).

``dictionary_nn(matrices, metrics, backend)`` plans a pool from what Ray reports
(``checkray.engine.runtime.plan_actor_pool``): one actor per GPU when there are GPUs (each on its
share of the rows, torch on ``cuda``), else one CPU actor holding every thread (on few
cores one actor with all threads beats several small ones). Every actor runs the same
``checkray.engine.costello.neighbours.nearest_neighbour_distances`` on its row ranges; the
dictionary matrix goes to the object store once per model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from checkray.engine.config import TASK_TIMEOUT_S


class NeighbourActor:
    def __init__(self, device: str, threads: int | None = None):
        self.device = "cuda" if device == "gpu" else "cpu"
        self.threads = threads

    def run(self, X: np.ndarray, metric: str, start: int, stop: int) -> tuple[int, np.ndarray]:
        from checkray.engine.costello.neighbours import nearest_neighbour_distances

        nn = nearest_neighbour_distances(
            X, metric, self.device, rows=(start, stop), threads=self.threads, prepared=True
        )
        return start, nn


def dictionary_nn(
    matrices: Mapping[str, np.ndarray],
    metrics: Sequence[str],
    backend: str = "auto",
    rows_per_task: int = 4096,
    timeout_s: float = TASK_TIMEOUT_S,
) -> dict[str, dict[str, np.ndarray]]:
    """model -> metric -> nearest-neighbour distance of every usable dictionary row."""
    import ray

    from checkray.engine.costello.neighbours import usable_rows
    from checkray.engine.runtime import cluster_resources, plan_actor_pool, wait_for

    plan = plan_actor_pool(cluster_resources(), backend)
    actors = [
        ray.remote(NeighbourActor).options(**plan.ray_options(), max_restarts=1).remote(plan.device, plan.threads)
        for _ in range(plan.pool_size)
    ]
    try:
        pending, shapes = [], {}
        k = 0
        for model, matrix in matrices.items():
            X = usable_rows(matrix)
            shapes[model] = len(X)
            ref = ray.put(X)
            for metric in metrics:
                for start in range(0, len(X), rows_per_task):
                    actor = actors[k % len(actors)]
                    k += 1
                    pending.append(
                        (model, metric, actor.run.remote(ref, metric, start, min(start + rows_per_task, len(X))))
                    )
        out: dict[str, dict[str, np.ndarray]] = {
            m: {metric: np.empty(n) for metric in metrics} for m, n in shapes.items()
        }
        for model, metric, ref in pending:
            start, nn = wait_for(ref, timeout_s, f"a nearest-neighbour block of {model} ({metric})")
            out[model][metric][start : start + len(nn)] = nn
        return out
    finally:
        for actor in actors:
            ray.kill(actor)
