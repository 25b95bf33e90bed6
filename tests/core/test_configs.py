"""Every shipped config validates (a typo in configs/ would otherwise surface mid-run)."""

from pathlib import Path

import pytest

import jobs.cli  # noqa: F401  (registers every job's config section)
from jobs.config import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates(path):
    cfg = load_config(path)
    for name in (cfg.model_extra or {}):
        assert cfg.section(name) is not None


def test_paper_config_asks_for_vllm_and_three_versions():
    cfg = load_config(Path(CONFIGS[0]).parent / "mft_paper.yaml")
    assert cfg.section("llm").backend == "vllm" and cfg.section("mft").versions == 3
    assert cfg.section("topics").representatives.top_k == 10 and cfg.section("topics").clusterer.n_clusters == 5
