"""The mask fillers of S²LCT's expansion: which model proposes the words a mask may take.

One record per backend (``checkray.engine.lazy.LazyRegistry``, as the LLM backends and
model families): its ``ref`` names the class the expansion actor builds
(``actors/s2lct/mask_filler.py``), imported only there; its traits say what the job and
the suite need to know without importing it. ``s2lct.filler.backend`` names one, or
``auto``: ``hf`` when ``filler.hf_model`` is set, else ``offline`` (``filler_backend``).

A filler class is built as ``Filler(filler_config, grammar, nlp, threads)`` and has
``rank(items, tags) -> [(score, words)]`` (best first) and a class method
``preflight(filler_config)`` that raises the one-line error an actor would hit.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkray.engine.lazy import LazyRegistry


@dataclass(frozen=True)
class FillerBackend:
    name: str
    ref: str  # "module:Class" of the filler the expansion actor builds
    # How the suite's provenance and the report name the filler: formatted with the
    # filler section's fields.
    provenance: str
    # Its scores are bigram log-probabilities (+ a cosine), on the scale of
    # ``filler.min_score``; a fill-mask model's probabilities are not, so it drops nothing.
    lm_scored: bool = False


FILLERS: LazyRegistry = LazyRegistry("s2lct mask filler")
for _filler in [
    FillerBackend(
        "offline",
        "checkray.actors.s2lct.mask_filler:OfflineFiller",
        "bigram-lm+vectors:{pipeline}",
        lm_scored=True,
    ),
    FillerBackend("hf", "checkray.actors.s2lct.mask_filler:HFFiller", "hf:{hf_model}"),
]:
    FILLERS.register(_filler)
