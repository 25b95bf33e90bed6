"""A notebook, run headless in a real Jupyter kernel (nbclient): checkray's functions
return results that render themselves (a per-model table, the first failures, a link
to the report), the generated job functions work, and Ray's and the workers' output
goes to the run's log, not into the notebook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "configs" / "suites" / "sentiment_templates.jsonl"

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _notebook(tmp_path: Path):
    import nbformat

    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        "  - {name: keyword, family: callable, path: 'tests.fakes.models:keyword_sentiment'}\n"
        "  - {name: naive, family: callable, path: 'tests.fakes.models:naive_sentiment'}\n"
        "  - {name: chatty, family: callable, path: 'tests.fakes.models:chatty_sentiment'}\n"
    )
    cells = [
        "import sys, checkray\nprint('ray' in sys.modules, 'torch' in sys.modules)",
        f"suite = checkray.templates(spec={str(SPEC)!r}, nsamples=3, out={str(tmp_path / 'suite')!r})\n"
        "suite.table('suite').shape[0] > 20",
        f"res = checkray.benchmark({str(registry)!r}, suite.path + '/suite.parquet', "
        f"settings={{'runtime.num_cpus': 2}}, out={str(tmp_path / 'bench')!r})\nres",
        "sorted(res.leaderboard.model)",
    ]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])


def _texts(cell, kind: str) -> str:
    """A cell's stream (``stdout``/``stderr``) or its result's ``text/plain``/``text/html``."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and kind == output["name"]:
            parts.append(output["text"])
        elif output["output_type"] == "execute_result" and kind in output["data"]:
            parts.append(output["data"][kind])
    return "".join(parts)


def _shown(cell) -> str:
    """Everything a cell shows: streams and displayed data (checkray's console lines are
    rich displays in a notebook)."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", "") or "".join(str(v) for v in output.get("data", {}).values()))
    return "".join(parts)


@pytest.mark.trusts_code
@pytest.mark.timeout(600)
def test_a_notebook_renders_results_and_keeps_ray_output_in_the_log(tmp_path):
    from nbclient import NotebookClient

    notebook = _notebook(tmp_path)
    NotebookClient(notebook, timeout=540, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    imports, templates, bench, names = notebook.cells

    assert _texts(imports, "stdout").strip() == "False False"  # import checkray starts nothing heavy
    assert _texts(templates, "text/plain") == "True"
    shown = _texts(bench, "text/html")
    assert "<b>checkray benchmark</b>" in shown and "leaderboard.html" in shown  # links the report
    assert "keyword" in shown and "naive" in shown and "failing cases, a few per model" in shown
    assert json.loads(_texts(names, "text/plain").replace("'", '"')) == ["chatty", "keyword", "naive"]

    everything = "".join(_shown(c) for c in notebook.cells)
    for noise in ("chatty model", "INFO worker.py", "Started a local Ray instance", "(raylet)", "pid="):
        assert noise not in everything, everything[-2000:]
    log = (tmp_path / "bench" / "logs" / "checkray.log").read_text()
    assert log.startswith("=== checkray.benchmark(")
    assert "chatty model: stderr line" in log and "chatty model: stdout line" in log, log[-2000:]
