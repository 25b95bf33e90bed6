"""Report pages: bytes on disk and load time in headless Chromium, the site as written
(one shared plotly bundle, ``engine/report.write_assets``) against the same pages each
made self-contained (plotly inlined, ``engine/report.inline_assets``: how every page was
written before the site shared one bundle).

Two sets of pages:

* ``--site DIR``: every ``*.html`` of a run site (default ``runs/demo-final``, what
  ``make demo`` writes with ``--out runs/demo-final``);
* a leaderboard at scale: 36 models x the tests of a CheckList-size suite (``--suite``,
  a suite Parquet; default: CheckList's released sentiment suite imported from
  ``../shared/data/checklist``), every case given a seeded random verdict per model
  (a per-model, per-test failure rate drawn from Beta(1, 3)), summarised and rendered by
  the benchmark's own code (``engine/benchmark/summary.py``, ``jobs/benchmark/report.py``).
  The verdicts are synthetic: this measures rendering, not models.

Load time, read from the page's ``performance.now()`` (ms since navigation start): until
the load event and every figure near the first screen has drawn (a page draws each
figure as it comes near the screen), and until every figure has drawn once all are asked
for (what printing does); the median of ``--repeat`` loads per page, each page loaded in
turn (so the browser's caches are as warm as a reader's going through the site). Goal:
every page's first screen under 1 s.

    .venv/bin/python bench/bench_report_pages.py [--site runs/demo-final] [--suite S.parquet] [--models 36] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RELEASED = ROOT.parent / "shared" / "data" / "checklist" / "sentiment_suite.tar.gz"
GOAL_S = 1.0

# Resolves with two performance.now() readings (ms since navigation start): when the page
# has loaded and every figure near the first screen has drawn (the page draws a figure as
# it comes near the screen), then, after asking for every figure (the page's beforeprint
# handler), when all have drawn; -1 after 60 s.
_READY_JS = """
const done = arguments[arguments.length - 1];
const t0 = Date.now();
const plots = () => [...document.querySelectorAll('.plotly-graph-div')];
const near = el => el.getBoundingClientRect().top < window.innerHeight + 400;
let first = null;
(function poll() {
  if (Date.now() - t0 > 60000) return done([-1, -1]);
  if (first === null && document.readyState === 'complete' && plots().filter(near).every(p => p._fullLayout)) {
    first = performance.now();
    window.dispatchEvent(new Event('beforeprint'));
  }
  if (first !== null && plots().every(p => p._fullLayout)) return done([first, performance.now()]);
  setTimeout(poll, 5);
})();
"""


def load_ms(driver, page: Path) -> tuple[float, float]:
    driver.get(page.resolve().as_uri())
    first, every = driver.execute_async_script(_READY_JS)
    return float(first), float(every)


def measure(driver, pages: list[Path], repeat: int) -> dict[Path, tuple[float, float]]:
    """Per page, the medians of (first screen drawn, every figure drawn) in ms."""
    times: dict[Path, list[tuple[float, float]]] = {p: [] for p in pages}
    for _ in range(repeat):
        for page in pages:
            times[page].append(load_ms(driver, page))
    return {p: (statistics.median(a for a, _ in t), statistics.median(b for _, b in t)) for p, t in times.items()}


def inlined_copy(site: Path, into: Path) -> list[Path]:
    """Every page of ``site`` copied under ``into`` with plotly inlined (the layout kept)."""
    from checkray.engine.report import inline_assets

    pages = []
    for page in sorted(site.rglob("*.html")):
        if "stages" in page.relative_to(site).parts:
            continue
        target = into / page.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(inline_assets(page.read_text(encoding="utf-8")), encoding="utf-8")
        pages.append(target)
    return pages


def site_pages(site: Path) -> list[Path]:
    return [p for p in sorted(site.rglob("*.html")) if "stages" not in p.relative_to(site).parts]


def bundle_bytes(site: Path) -> int:
    from checkray.engine.report import plotly_asset

    bundle = site / plotly_asset()
    return bundle.stat().st_size if bundle.exists() else 0


def import_released(into: Path) -> Path:
    if not RELEASED.exists():
        sys.exit(f"{RELEASED}: not found; pass --suite SUITE.parquet")
    cmd = [sys.executable, "-m", "checkray.jobs.cli", "import", "checklist", str(RELEASED)]
    cmd += ["--labels", "0=negative,1=neutral,2=positive", "--mapping", str(ROOT / "configs/checklist/sentiment.yaml")]
    subprocess.run([*cmd, "--out", str(into)], check=True, capture_output=True)
    return into / "suite.parquet"


def synthetic_results(suite, model: str, rng: np.random.Generator):
    """One model's results on every case of ``suite``: a failure rate per test, seeded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from checkray.engine.benchmark.results import RESULTS_SCHEMA

    n = suite.num_rows
    tests = pc.binary_join_element_wise(suite.column("capability"), suite.column("topic"), "|").to_numpy(
        zero_copy_only=False
    )
    names, index = np.unique(tests.astype(str), return_inverse=True)
    rates = rng.beta(1, 3, size=len(names))
    passed = rng.random(n) >= rates[index]
    labels = ["negative", "neutral", "positive"]
    p_pos = rng.random(n).astype(np.float32)
    probs = np.stack([1 - p_pos, np.zeros(n, np.float32), p_pos], axis=1)
    cols = {name: suite.column(name) for name in ("suite", "case_id", "capability", "topic", "test_type", "text")}
    return pa.table(
        {
            "model": pa.array([model] * n, pa.string()),
            "suite": cols["suite"],
            "version": pa.nulls(n, pa.string()),
            "case_id": cols["case_id"],
            "case_digest": pa.nulls(n, pa.string()),
            "testcase": cols["case_id"],
            "capability": cols["capability"],
            "topic": cols["topic"],
            "test_type": cols["test_type"],
            "text": cols["text"],
            "expected_label": suite.column("expected_label"),
            "expected_labels": suite.column("expected_labels"),
            "perturbs": suite.column("perturbs"),
            "predicted": pa.array(np.where(p_pos > 0.5, "positive", "negative"), pa.string()),
            "probabilities": pa.array(list(probs), pa.list_(pa.float32())),
            "labels": pa.array([labels] * n, pa.list_(pa.string())),
            "pass": pa.array(passed),
            "error": pa.nulls(n, pa.string()),
        },
        schema=RESULTS_SCHEMA,
    )


def scale_site(suite_path: Path, n_models: int, into: Path) -> tuple[list[Path], int]:
    """A benchmark run directory holding only the leaderboard of ``n_models`` synthetic
    models on the suite; returns its page and the suite's row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from checkray.engine.benchmark.results import example_failures
    from checkray.engine.benchmark.summary import summarize
    from checkray.engine.report import write_assets, write_page
    from checkray.engine.rundir import RunDir
    from checkray.jobs.benchmark.report import leaderboard_sections

    suite = pq.read_table(suite_path)
    rng = np.random.default_rng(0)
    summaries, examples = [], []
    for m in range(n_models):
        results = synthetic_results(suite, f"model_{m:02d}", rng)
        summaries.append(summarize(results))
        examples.append(example_failures(results, 3))
    summary, example = pa.concat_tables(summaries), pa.concat_tables(examples)
    run = RunDir(str(into))
    run.claim("benchmark")
    write_assets(run)
    title = "checkray · benchmark"
    sections = leaderboard_sections(summary, example)
    write_page(run, "leaderboard.html", title, sections, subtitle=f"{n_models} models × 1 suite file(s)")
    return [into / "leaderboard.html"], suite.num_rows


def compare(driver, label: str, shared_site: Path, pages: list[Path], repeat: int, scratch: Path) -> bool:
    inlined_copy(shared_site, scratch / f"inlined-{label}")
    inlined = [scratch / f"inlined-{label}" / p.relative_to(shared_site) for p in pages]
    bundle = bundle_bytes(shared_site)
    shared_ms, inline_ms = measure(driver, pages, repeat), measure(driver, inlined, repeat)
    print(f"== {label}: {len(pages)} pages; shared bundle {bundle / 2**20:.2f} MiB, read once per site")
    print(
        f"   {'page':38} {'KiB':>6} {'inlined KiB':>11} {'first screen ms':>15} {'all figures ms':>14} {'inlined ms':>10}"
    )
    ok = True
    for page, copy in zip(pages, inlined):
        (first, every), (inline_first, _) = shared_ms[page], inline_ms[copy]
        ok &= 0 <= first < GOAL_S * 1000
        name = str(page.relative_to(shared_site))
        size_a, size_b = page.stat().st_size / 1024, copy.stat().st_size / 1024
        print(f"   {name:38} {size_a:6.0f} {size_b:11.0f} {first:15.0f} {every:14.0f} {inline_first:10.0f}")
    total_shared = sum(p.stat().st_size for p in pages) + bundle
    total_inlined = sum(p.stat().st_size for p in inlined)
    slowest = max(a for a, _ in shared_ms.values())
    print(
        f"   site bytes: {total_shared / 2**20:.2f} MiB shared vs {total_inlined / 2**20:.2f} MiB inlined "
        f"(ratio {total_shared / total_inlined:.3f}x); slowest first screen {slowest:.0f} ms "
        f"(every figure: {max(b for _, b in shared_ms.values()):.0f} ms); goal every page's first screen "
        f"< {GOAL_S * 1000:.0f} ms: {'met' if ok else 'NOT met'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default=str(ROOT / "runs" / "demo-final"), help="A run site ('' to skip).")
    parser.add_argument("--suite", default=None, help="Suite Parquet for the scale leaderboard ('' to skip).")
    parser.add_argument("--models", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tests.browser import chromium_driver

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    scratch = Path(tempfile.mkdtemp(prefix="checkray-bench-pages-"))
    driver = chromium_driver()
    ok = True
    try:
        if args.site:
            site = Path(args.site)
            if not (site / "index.html").exists():
                sys.exit(f"{site}: no run site (make demo writes one); pass --site DIR or --site ''")
            ok &= compare(driver, "site", site, site_pages(site), args.repeat, scratch)
        if args.suite != "":
            t = time.perf_counter()
            suite = Path(args.suite) if args.suite else import_released(scratch / "imported")
            pages, rows = scale_site(suite, args.models, scratch / "scale")
            print(f"== scale: {args.models} models x {rows:,} cases rendered in {time.perf_counter() - t:.1f} s")
            ok &= compare(driver, "scale", scratch / "scale", pages, args.repeat, scratch)
    finally:
        driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average now {os.getloadavg()[0]:.1f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
