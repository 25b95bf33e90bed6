"""Report sections of the ``costello`` and ``repair`` jobs: triple counts per CR (Table 1),
classifiers, thresholds, violations and precision per model, Table 2's layout per suite,
rates per suite, the largest violations; the repair's Table 3. The tables themselves are
computed in ``checkray.engine.costello.tables``; this module lays them out."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine.costello.config import CostelloConfig
from checkray.engine.costello.repair import RepairInputs
from checkray.engine.costello.tables import (
    classifier_summary,
    costello_table1,
    costello_table2,
    example_triples,
    largest_violations,
    threshold_table,
    violation_rates_per_suite,
    violations_per_model,
)
from checkray.engine.costello.triples import CAPABILITIES
from checkray.engine.report import Section, table_html


def rejected_section(rejected: pa.Table, kept: int) -> Section:
    """Rejected candidate variants per check (rejected.parquet), next to the triples kept."""
    from checkray.engine.case_checks import rejection_summary

    rows = rejection_summary(rejected, kept)
    rows[0]["check"] = "(triples kept)"
    return Section(
        "COSTELLO: candidate variants rejected per check",
        [table_html(rows)],
        "Every candidate a check refused is in rejected.parquet with the check and its reason "
        "(sense, common_word, polarity, fixed_expression, named_entity, context_fit, profanity; "
        "person, consistent for gender swaps; cr2_farther). 'share' is of kept triples + rejected variants.",
    )


def triples_section(wide: pa.Table) -> Section:
    return Section(
        "COSTELLO: contrast triples per CR (Table 1)",
        [table_html(costello_table1(wide)), table_html(example_triples(wide))],
        "CR1 synonym vs antonym of the same word; CR2 gender swap vs synonym; CR3 synonym vs "
        "semantic inversion; CR4 shared-word synonym vs antonym in a matching pair. 'paper': the "
        "paper's Table 1 (SST + MRPC).",
    )


def classifiers_section(classifiers: pa.Table) -> Section:
    return Section(
        "COSTELLO: downstream classifiers (ground truth)",
        [table_html(classifier_summary(classifiers))],
        "Held-out accuracy of each model's MLPs (the paper's 14 architectures; the paper reports a mean above 0.85).",
    )


def thresholds_section(rows: list[dict]) -> Section:
    return Section(
        "COSTELLO: adaptive thresholds (Algorithm 2)",
        [table_html(rows)],
        "Nearest-neighbour distances within each model's dictionary ('words' entries: its whole "
        "vocabulary unless costello.dictionary_size samples it); mu-2sigma and mu-sigma with sigma the "
        "standard deviation; negatives clamped to 0.",
    )


def per_model_section(violations: pa.Table, classifiers: pa.Table, cc: CostelloConfig) -> Section:
    return Section(
        f"COSTELLO: violations per model ({cc.distance}, {cc.threshold})",
        [table_html(violations_per_model(violations, classifiers, cc.distance, cc.threshold))],
        "N_V violations (d(s,s+) - d(s,s-) > theta); P_A / P_B: share of violations that the "
        f"{cc.classifiers} downstream MLPs confirm under GT_A / GT_B (Wilcoxon, alpha {cc.alpha}).",
    )


def table2_sections(violations: pa.Table) -> list[Section]:
    """COSTELLO's Table 2 layout, one section per suite."""
    cols = ["model", "suite", "capability", "distance", "threshold", "verdict", "gt_a", "gt_b"]
    rows = violations.select(cols).to_pylist()
    return [
        Section(
            f"COSTELLO: effectiveness per distance and threshold (Table 2 layout), suite {suite}",
            [table_html(costello_table2([r for r in rows if r["suite"] == suite], CAPABILITIES))],
            "N_M models with a violation, N_V violations per model (mean), P_A/P_B precision (%) "
            "averaged over models; CR4 has no classifier ground truth.",
        )
        for suite in dict.fromkeys(r["suite"] for r in rows)
    ]


def suite_rates_section(violations: pa.Table, cc: CostelloConfig) -> Section:
    return Section(
        f"COSTELLO: violation rates per suite ({cc.distance})",
        [table_html(violation_rates_per_suite(violations, cc.distance))],
        "The generated suite next to the given ones (e.g. the paper's released triples), same "
        "models, thresholds and classifiers.",
    )


def costello_sections(
    wide: pa.Table, violations: pa.Table, thresholds: pa.Table, classifiers: pa.Table, cc: CostelloConfig
) -> list[Section]:
    """The costello report; sections without rows (no classifiers, one suite, no violation) are left out."""
    sections = [triples_section(wide)]
    if classifiers.num_rows:
        sections.append(classifiers_section(classifiers))
    threshold_rows = threshold_table(thresholds)
    if threshold_rows:
        sections.append(thresholds_section(threshold_rows))
    sections.append(per_model_section(violations, classifiers, cc))
    sections += table2_sections(violations)
    if len(set(violations.column("suite").to_pylist())) > 1:
        sections.append(suite_rates_section(violations, cc))
    largest = largest_violations(wide, violations, cc.distance, cc.threshold)
    if largest:
        sections.append(Section("COSTELLO: largest violations", [table_html(largest)]))
    return sections


def repair_sections(inputs: RepairInputs, table3: pa.Table, history: pa.Table, model_dir: str) -> list[Section]:
    """The repair report: COSTELLO's Table 3 layout and the loss per epoch."""
    cc, s, h = inputs.cc, inputs.settings, history.to_pylist()
    summary = (
        f"{inputs.spec.name}: {len(inputs.violated)} violated and {len(inputs.benign)} benign triples of suite "
        f"{inputs.suite}; {s.epochs} "
        f"epochs of SGD (lr {s.learning_rate}, alpha {s.alpha}); triplet loss on the violated triples "
        f"probed {h[0]['loss_before']:.4f} -> {h[0]['loss_after']:.4f}; model saved to {model_dir}."
    )
    return [
        Section(
            f"COSTELLO repair: fixing rate (Table 3 layout), {cc.distance} / {cc.threshold}",
            [table_html(table3.to_pylist()), table_html(h)],
            summary,
        )
    ]
