"""How far each generator's cases can be trusted, from people's verdicts.

    python bench/bench_suite_validity.py [bench/data/annotations] [--part dev|final] [--by-capability]
        [--run-filter demo] [--markdown] [--write-estimates engine/data/validity_estimates.json]
        [--pool]

Reads the annotation batches (docs/validity.md: one JSON Lines file of judged cases and a
``.meta.json`` each) and prints, per generator (and with ``--by-capability`` per
capability): cases annotated, % label-valid, % fluent, % on-capability and % all three,
each with its 95 % Wilson interval, the yield recorded when the batch was drawn (cases
kept per input), and whether the generator reaches the targets (≥ 95 % label-valid,
≥ 90 % fluent, ≥ 90 % on-capability). Batches are grouped by the run they judged, so a
before/after pair of runs prints as two tables; ``--pool`` prints the batches given as one
table instead (fresh draws of several runs of the same rules, each yield listed). ``--write-estimates`` writes what every
job's report shows (``validity_estimate.parquet``): per generator, the shares of its
current batches (the final part when there is one, else dev; the newest code version).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkray.engine.suite_validity import (  # noqa: E402
    TARGETS,
    VERDICTS,
    Batch,
    build_estimates,
    latest_per_case,
    meets,
    read_batches,
    summarize,
)

COLUMNS = (*VERDICTS, "all_three")


def group_by_run(batches: list[Batch]) -> dict[tuple[str, str], list[Batch]]:
    """Batches by (what they judged: run label and code version)."""
    out: dict[tuple[str, str], list[Batch]] = {}
    for batch in batches:
        key = (str(batch.meta.get("run", batch.path.name)), str(batch.meta.get("code_version", "?")))
        out.setdefault(key, []).append(batch)
    return out


def yield_of(batches: list[Batch], generator: str) -> str:
    """The yield recorded with each batch's run, once per distinct run."""
    found = [str((b.meta.get("yields") or {})[generator]) for b in batches if generator in (b.meta.get("yields") or {})]
    return "; ".join(dict.fromkeys(found)) or "–"


def print_table(batches: list[Batch], *, by_capability: bool, markdown: bool) -> None:
    rows = summarize(latest_per_case(batches), by_capability=by_capability)
    header = ["generator", "capability", "n", *COLUMNS, "yield", "targets"]
    lines = [header]
    for row in rows:
        target = "" if row.capability else ("met" if meets(row, TARGETS) else "not met")
        lines.append(
            [
                row.generator if not row.capability else "",
                row.capability,
                str(row.n),
                *(row.shares[c].text() for c in COLUMNS),
                yield_of(batches, row.generator) if not row.capability else "",
                target,
            ]
        )
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for line in lines[1:]:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


def write_estimates(out: Path, batches: list[Batch]) -> None:
    """Per generator, the shares of its current batches (final part if any, newest code
    version), written atomically."""
    estimates = build_estimates(batches)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(estimates, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out)
    for generator, entry in estimates.items():
        judged = entry["judged_on"]
        print(f"{out.name}: {generator}: {entry['overall']['n']} judged on {judged['code_version']} ({judged['part']})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "bench" / "data" / "annotations")])
    parser.add_argument("--part", choices=("dev", "final"), default=None, help="only batches of this part")
    parser.add_argument("--by-capability", action="store_true", help="a row per capability too")
    parser.add_argument("--run-filter", default=None, help="only runs whose label contains this")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--pool", action="store_true", help="one table over every batch given, not one per run")
    parser.add_argument(
        "--write-estimates",
        metavar="JSON",
        default=None,
        help="also write the estimates every report shows (engine/data/validity_estimates.json)",
    )
    args = parser.parse_args(argv)
    batches = read_batches(args.paths, part=args.part)
    if not batches:
        raise SystemExit("error: no annotation batches found")
    if args.write_estimates:
        write_estimates(Path(args.write_estimates), batches)
    groups = group_by_run(batches)
    if args.pool:
        versions = ", ".join(sorted({version for _, version in groups}))
        groups = {(f"pooled: {len(groups)} runs", versions): batches}
    for (run, version), group in groups.items():
        if args.run_filter and args.run_filter not in run:
            continue
        parts = sorted({b.part for b in group})
        print(f"\n## {run} (code {version}; part {', '.join(parts)}; {sum(len(b.cases) for b in group)} judged)\n")
        print_table(group, by_capability=args.by_capability, markdown=args.markdown)
    print(f"\ntargets: {', '.join(f'{k} >= {v:.0%}' for k, v in TARGETS.items())}; intervals: 95 % Wilson")


if __name__ == "__main__":
    main()
