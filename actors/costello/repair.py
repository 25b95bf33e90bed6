"""COSTELLO's repair loop (§5.4): fine-tune an embedding model on its own test results.

Each batch is half violated triples, half benign ones. Violated triples get a triplet
margin loss (pull s+ towards s, push s- away); benign triples get the MSE between the
new embeddings and the original model's (a distillation anchor, so the model does not
forget what it already embeds well):

    L = alpha * TripletMarginLoss(e, e+, e-) + (1 - alpha) * MSE(e_old, e_new)

Violated triples are resampled at random up to the number of benign ones ("randomly
complete the violated samples to the size of the benign samples"). The paper: alpha 0.5,
SGD, learning rate 1e-4, 8 epochs. ``RepairActor`` runs it inside a Ray actor planned by
``checkray.engine.runtime.plan_actor_pool``: a ``num_gpus`` actor when Ray reports a GPU, a CPU
actor on a cluster of several nodes, and in the driver on a one-node CPU Ray
(``runtime.embed_in_driver_below: 0`` keeps it on an actor).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from checkray.engine.config import TASK_TIMEOUT_S
from checkray.engine.costello.config import EmbedderSpec, RepairSettings
from checkray.engine.costello.repair import Triple


def epoch_plan(
    n_violated: int, n_benign: int, batch_size: int, rng: np.random.Generator, max_triples: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Index batches for one epoch, each half violated, half benign triples: the smaller
    side is completed by random resampling to the larger one's count (the paper completes
    the violated side), and ``max_triples`` caps that count (a short demo epoch)."""
    half = max(1, batch_size // 2)
    count = max(n_violated, n_benign)
    if max_triples:
        count = min(count, max_triples)

    def side(n: int) -> np.ndarray:
        if n == 0:
            return np.array([], dtype=np.int64)
        order = rng.permutation(n)
        extra = rng.integers(0, n, max(0, count - n))
        return np.concatenate([order, extra])[:count]

    violated, benign = side(n_violated), side(n_benign)
    return [(violated[i : i + half], benign[i : i + half]) for i in range(0, count, half)]


def embed_train(model, texts: Sequence[str]):
    """Sentence embeddings with gradients (``encode`` runs under no_grad)."""
    import torch

    # sentence-transformers >= 5.4 names it ``preprocess`` (``tokenize`` is deprecated)
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(list(texts))
    features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
    return model(features)["sentence_embedding"]


def triplet_loss(model, triples: Sequence[Triple], margin: float = 1.0):
    import torch

    s, p, n = (embed_train(model, [t[i] for t in triples]) for i in range(3))
    return torch.nn.TripletMarginLoss(margin=margin, p=2)(s, p, n)


def mean_triplet_loss(model, triples: Sequence[Triple], margin: float = 1.0, batch: int = 32) -> float:
    """Triplet loss over ``triples`` in eval mode (no dropout, no gradient)."""
    import torch

    if not triples:
        return 0.0
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(triples), batch):
            chunk = triples[i : i + batch]
            total += float(triplet_loss(model, chunk, margin)) * len(chunk)
    model.train(was_training)
    return total / len(triples)


@dataclass(frozen=True)
class RepairResult:
    history: list[dict]
    loss_before: float
    loss_after: float
    seconds: float
    device: str


def train_repair(
    model,
    violated: Sequence[Triple],
    benign: Sequence[Triple],
    settings: RepairSettings,
    old_embeddings: dict[str, np.ndarray] | None = None,
) -> RepairResult:
    """Fine-tune ``model`` (a SentenceTransformer) in place."""
    import torch

    start = time.perf_counter()
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    # Every epoch's batches are drawn first, so the original model embeds only the benign
    # texts that are used (a capped epoch touches few of them).
    plans = [
        epoch_plan(len(violated), len(benign), settings.batch_size, rng, settings.max_triples)
        for _ in range(settings.epochs)
    ]
    used = sorted({t for plan in plans for _, b_idx in plan for i in b_idx for t in benign[i]})
    # The anchors: the original model's embeddings, given (from the content cache) or computed here.
    old_embeddings = dict(old_embeddings or {})
    need = [t for t in used if t not in old_embeddings]
    if need:
        old = model.encode(need, convert_to_numpy=True, show_progress_bar=False, batch_size=64)
        old_embeddings.update(zip(need, old))
    # The loss is reported on (at most max_triples of) the violated triples.
    probe = list(violated[: settings.max_triples] if settings.max_triples else violated)
    loss_before = mean_triplet_loss(model, probe, settings.margin)
    optimizer = torch.optim.SGD(model.parameters(), lr=settings.learning_rate)
    mse = torch.nn.MSELoss()
    history = []
    model.train()
    for epoch, batches in enumerate(plans):
        sums = {"loss": 0.0, "triplet": 0.0, "mse": 0.0}
        for v_idx, b_idx in batches:
            optimizer.zero_grad()
            trip = triplet_loss(model, [violated[i] for i in v_idx], settings.margin) if len(v_idx) else torch.zeros(())
            if len(b_idx):
                texts = [t for i in b_idx for t in benign[i]]
                target = torch.tensor(np.stack([old_embeddings[t] for t in texts]), device=model.device)
                dist = mse(embed_train(model, texts), target)
            else:
                dist = torch.zeros(())
            loss = settings.alpha * trip + (1 - settings.alpha) * dist
            loss.backward()
            optimizer.step()
            sums["loss"] += loss.item()
            sums["triplet"] += trip.item()
            sums["mse"] += dist.item()
        n = max(1, len(batches))
        history.append({"epoch": epoch + 1, "batches": len(batches), **{k: v / n for k, v in sums.items()}})
    model.eval()
    loss_after = mean_triplet_loss(model, probe, settings.margin)
    return RepairResult(history, loss_before, loss_after, time.perf_counter() - start, str(model.device))


class RepairActor:
    """Holds the model being repaired; ``repair`` trains it and saves it to ``out_dir``."""

    def __init__(self, spec: EmbedderSpec, threads: int | None = None):
        from checkray.actors.costello.st_embedder import load_encoder

        self.model = load_encoder(spec, threads=threads, backend="torch")  # it trains

    def repair(
        self,
        violated: list[Triple],
        benign: list[Triple],
        settings: RepairSettings,
        out_dir: str,
        old_embeddings: dict[str, np.ndarray] | None = None,
    ) -> RepairResult:
        result = train_repair(self.model, violated, benign, settings, old_embeddings)
        self.model.save(out_dir)
        return result


def repair_in_actor(
    spec: EmbedderSpec,
    violated: list[Triple],
    benign: list[Triple],
    settings: RepairSettings,
    out_dir: str,
    backend: str = "auto",
    timeout_s: float = TASK_TIMEOUT_S,
    old_embeddings: dict[str, np.ndarray] | None = None,
) -> RepairResult:
    """Train in an actor; ``old_embeddings``: the original model's embeddings of benign
    texts already known (the content cache), so the actor encodes only the others."""
    import ray

    from checkray.actors.embed_cache import small_work_plan
    from checkray.engine.runtime import cluster_resources, plan_actor_pool, wait_for

    plan = plan_actor_pool(cluster_resources(), backend, pool_size=1)
    if small_work_plan(plan, 1, 1, plan.device).in_driver:  # one training: one unit of work
        return repair_here(spec, violated, benign, settings, out_dir, old_embeddings, plan.threads)
    actor = ray.remote(RepairActor).options(**plan.ray_options(), max_restarts=0).remote(spec, plan.threads)
    try:
        return wait_for(
            actor.repair.remote(violated, benign, settings, out_dir, old_embeddings),
            timeout_s,
            "the repair",
        )
    finally:
        ray.kill(actor)


def repair_here(
    spec: EmbedderSpec,
    violated: list[Triple],
    benign: list[Triple],
    settings: RepairSettings,
    out_dir: str,
    old_embeddings: dict[str, np.ndarray] | None,
    threads: int | None,
) -> RepairResult:
    """The repair in this process: on a one-node CPU Ray an actor would only add a process
    start and a second import of torch (~6 s of the demo's repair) to the same training."""
    from checkray.engine.memory import release_memory

    holder = RepairActor(spec, threads)
    try:
        return holder.repair(violated, benign, settings, out_dir, old_embeddings)
    finally:
        del holder
        release_memory()
