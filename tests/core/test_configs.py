"""Every shipped config validates, every value it writes is the value a job reads (a typo
or a silently coerced value in configs/ would otherwise surface mid-run), and configs load
without the CLI."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from checkray.jobs.config import load_config
from checkray.jobs.registry import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def _same(read, written) -> bool:
    """The value a job reads equals the one the file wrote (YAML lists vs tuples, int keys)."""
    if isinstance(written, dict):
        read = read if isinstance(read, dict) else dict(read)
        return all(_same(read.get(k, read.get(str(k))), v) for k, v in written.items())
    if isinstance(written, list):
        return len(list(read)) == len(written) and all(_same(r, w) for r, w in zip(read, written))
    return read == written and type(read) is not bool or read is written


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates_and_reads_back(path):
    raw = yaml.safe_load(path.read_text()) or {}
    cfg = load_config(path)
    dumped = cfg.model_dump(mode="python")
    for name, written in raw.items():
        if name in SECTIONS:
            section = cfg.section(name)
            assert isinstance(section, SECTIONS.get(name)), name
            read = section.model_dump(mode="python")
        else:
            read = dumped[name]
        assert _same(read, written), f"{path.name}: {name} reads back as {read!r}, file has {written!r}"


def test_a_config_loads_without_the_cli_or_ray():
    code = (
        "import sys; from checkray.jobs.config import load_config; cfg = load_config('configs/demo.yaml'); "
        "cfg.section('costello'); "
        "assert 'checkray.jobs.cli' not in sys.modules and 'ray' not in sys.modules, sorted(sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_typed_section_accessor():
    from checkray.engine.mft.config import MFTConfig
    from checkray.engine.topics.config import TopicsConfig

    cfg = load_config(None, {"mft.versions": 2})
    assert isinstance(cfg.section(MFTConfig), MFTConfig) and cfg.section(MFTConfig).versions == 2
    assert cfg.section(TopicsConfig) == cfg.section("topics")


def test_paper_config_asks_for_vllm_and_three_versions():
    cfg = load_config(ROOT / "configs" / "mft_paper.yaml")
    assert cfg.section("llm").backend == "vllm" and cfg.section("mft").versions == 3
    assert cfg.section("topics").representatives.top_k == 10 and cfg.section("topics").clusterer.n_clusters == 5
