"""Draw cases of a run for people to judge, show them, and record the verdicts.

    python bench/annotate.py sample RUN_DIR --generator s2lct_expansion --n 100 --seed 1 \
        --part dev --out bench/data/annotations/demo-s2lct-exp-dev.jsonl [--config configs/demo.yaml]
    python bench/annotate.py sample-released ../shared/data/costello/contrast_triples_sst.json \
        --n 50 --seed 1 --out bench/data/annotations/released-dev.jsonl
    python bench/annotate.py carry RUN_DIR --generator costello_cr3 --out bench/data/annotations/dev-...-carried-costello_cr3.jsonl
    python bench/annotate.py show BATCH.jsonl [--start 0 --count 50]
    python bench/annotate.py fill BATCH.jsonl VERDICTS.txt

A batch is a JSON Lines file of cases (``engine/suite_validity.py``; the guide is
docs/validity.md) beside a ``.meta.json`` naming the run, its config, the code version and
the sample. ``fill`` merges verdicts written one case a line as ``INDEX L F C [note]``
(L label-valid, F fluent, C on-capability: 1 or 0; INDEX as ``show`` prints it).

RUN_DIR is any run directory (a demo's, or one job's): every job run below it is read
through what it published (``manifest.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkray.engine.review import SUITE_OF_JOB, job_runs  # noqa: E402
from checkray.engine.review import units_of_run as review_units  # noqa: E402
from checkray.engine.suite_validity import GENERATORS, VERDICTS, jsonl_records, meta_path  # noqa: E402


def units_of_run(root: Path) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Every annotation unit below ``root`` by generator (the review page's units,
    ``engine/review.py``), and the digest of each suite read."""
    units: dict[str, list[dict]] = {}
    for unit in review_units(root):
        units.setdefault(unit["generator"], []).append(unit)
    digests = {
        str(run.relative_to(root)) or ".": hashlib.sha256((run / SUITE_OF_JOB[job]).read_bytes()).hexdigest()[:16]
        for job, run in job_runs(root)
    }
    return units, digests


def git_version() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        return sha.stdout.strip()[:12] + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def unjudged(unit: dict) -> dict:
    return {**unit, **{v: None for v in VERDICTS}, "note": ""}


def write_batch(out: Path, rows: list[dict], meta: dict) -> None:
    """The batch's cases (verdicts as given: None for a case to judge) and its meta."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    meta_path(out).write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(rows)} cases) and {meta_path(out).name}")


def _texts(unit: dict) -> tuple:
    return tuple(unit.get(k) for k in ("capability", "text", "text_pair", "closer", "farther"))


def unread_units(pool: list[dict], batches: list[Path]) -> list[dict]:
    """The units of ``pool`` that no batch holds, matched by id or by texts: a triple's id
    names its seed's position, which moves when the seeds before it change."""
    read: set = set()
    for batch in batches:
        for _, case in jsonl_records(batch):
            read |= {case["case_id"], _texts(case)}
    return [u for u in pool if u["case_id"] not in read and _texts(u) not in read]


def run_meta(args: argparse.Namespace, root: Path, digests: dict, population: int, sample: dict, part: str) -> dict:
    """A batch's meta for cases drawn from a run (``yields`` left for the caller)."""
    return {
        "run": str(args.run_label or root),
        "config": args.config,
        "code_version": args.code_version or git_version(),
        "suites": digests,
        "generator": args.generator,
        "population": population,
        "sample": sample,
        "part": part,
        "annotator": args.annotator,
        "drawn": datetime.now(UTC).isoformat(timespec="seconds"),
        "yields": None,
    }


def sample_command(args: argparse.Namespace) -> None:
    root = Path(args.run)
    units, digests = units_of_run(root)
    pool = units.get(args.generator, [])
    if not pool:
        raise SystemExit(f"error: {root}: no {args.generator} cases (have: {', '.join(sorted(units)) or 'none'})")
    pool = unread_units(pool, [Path(p) for p in args.exclude or []])
    picked = random.Random(args.seed).sample(pool, min(args.n, len(pool)))
    sample = {"n": len(picked), "seed": args.seed, "how": "simple random sample of the generator's cases"}
    meta = run_meta(args, root, digests, len(pool), sample, args.part)
    meta["yields"] = args.yields and json.loads(args.yields)
    write_batch(Path(args.out), [unjudged(u) for u in picked], meta)


def judged_by_texts(batches: list[Path]) -> dict[tuple, tuple[dict, str]]:
    """Every judged case of ``batches`` by its texts, with the batch's name (a later batch
    wins when two judged the same texts)."""
    judged: dict[tuple, tuple[dict, str]] = {}
    for batch in batches:
        for _, case in jsonl_records(batch):
            if all(case.get(v) is not None for v in VERDICTS):
                judged[_texts(case)] = (case, batch.name.removesuffix(".jsonl"))
    return judged


def carried_rows(pool: list[dict], judged: dict[tuple, tuple[dict, str]]) -> list[dict]:
    """``pool``'s cases, each carrying the verdict a batch gave the same texts (its note
    says which batch), or unjudged."""
    rows = []
    for unit in pool:
        hit = judged.get(_texts(unit))
        if hit is None:
            rows.append(unjudged(unit))
            continue
        case, name = hit
        note = f"carried from {name}" + (f": {case['note']}" if case.get("note") else "")
        rows.append({**unit, **{v: case[v] for v in VERDICTS}, "note": note})
    return rows


def carry_command(args: argparse.Namespace) -> None:
    """Every case of one generator in a run, with the verdicts earlier batches gave the same
    texts: a census of a run whose cases were all (or mostly) read before, as a dev batch."""
    root = Path(args.run)
    units, digests = units_of_run(root)
    pool = units.get(args.generator, [])
    if not pool:
        raise SystemExit(f"error: {root}: no {args.generator} cases (have: {', '.join(sorted(units)) or 'none'})")
    sources = [Path(p) for p in args.source] if args.source else default_sources(args.generator)
    rows = carried_rows(pool, judged_by_texts(sources))
    carried = [r for r in rows if r["label_valid"] is not None]
    named = sorted({r["note"].split(":")[0].removeprefix("carried from ") for r in carried})
    how = (
        f"every {args.generator} case of the run ({len(rows)}); {len(carried)} are identical to a case judged in "
        f"{', '.join(named) or 'no batch'} and carry its verdict (the note says which), {len(rows) - len(carried)} "
        "are left to judge. Dev: the carried verdicts were given before the code that made the run"
    )
    meta = run_meta(args, root, digests, len(pool), {"n": len(rows), "seed": None, "how": how}, "dev")
    write_batch(Path(args.out), rows, meta)
    print(f"{len(carried)} carried, {len(rows) - len(carried)} to judge")


def default_sources(generator: str) -> list[Path]:
    """The committed batches of ``generator``, carried ones left out (no verdict twice removed)."""
    found = sorted((ROOT / "bench" / "data" / "annotations").glob(f"*-{generator}.jsonl"))
    return [p for p in found if "-carried-" not in p.name]


def sample_released_command(args: argparse.Namespace) -> None:
    """The COSTELLO authors' released triples (CR1-CR3), a sample of each relation."""
    data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    names = {"SenWordFuzz": "cr1", "swapGender_sentiSynonymSubstitution": "cr2", "synon_contr": "cr3"}
    rng = random.Random(args.seed)
    units = []
    for relation, cr in names.items():
        items = data.get(relation, [])
        for i in sorted(rng.sample(range(len(items)), min(args.n, len(items)))):
            seed, closer, farther = items[i][:3]
            units.append(
                {
                    "case_id": f"{relation}-{i}",
                    "generator": f"costello_released_{cr}",
                    "capability": cr.upper(),
                    "text": seed,
                    "text_pair": None,
                    "closer": closer,
                    "farther": farther,
                    "expected": "closer nearer the seed than farther",
                    "source": f"{relation}[{i}]",
                }
            )
    meta = {
        "run": str(args.file),
        "config": None,
        "code_version": "the COSTELLO authors' released triples",
        "generator": "costello_released",
        "sample": {"n_per_relation": args.n, "seed": args.seed, "how": "simple random sample per relation"},
        "part": args.part,
        "annotator": args.annotator,
        "drawn": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_batch(Path(args.out), [unjudged(u) for u in units], meta)


def _s2lct_capabilities(cfg: dict) -> list[str]:
    """The capability files an S²LCT run read (its config, or the shipped configs/s2lct)."""
    listed = (cfg.get("s2lct") or {}).get("capabilities") or [str(ROOT / "configs" / "s2lct")]
    found: list[str] = []
    for item in listed:
        path = Path(item) if Path(item).is_absolute() else ROOT / item
        found += [str(p) for p in sorted(path.glob("*.yaml"))] if path.is_dir() else [str(path)]
    return found


def run_yields(root: Path) -> dict[str, str]:
    """Cases kept per input, per generator, from what the runs below ``root`` published:
    templates per template, MFT per representative prompted, TestAug per description,
    S²LCT seeds per capability and expansions per seed, COSTELLO triples per seed sentence."""
    units, _ = units_of_run(root)
    out: dict[str, str] = {}

    def ratio(name: str, kept: int, inputs: int, per: str) -> None:
        if inputs:
            out[name] = f"{kept / inputs:.2f} per {per} ({kept}/{inputs})"

    for job, run in job_runs(root):
        cfg = json.loads((run / "manifest.json").read_text()).get("config") or {}
        if job == "templates":
            templates = {u["source"] for u in units.get("templates", [])}
            ratio("templates", len(units.get("templates", [])), len(templates), "template")
        elif job == "mft":
            m = cfg.get("mft") or {}
            clusters = ((cfg.get("topics") or {}).get("clusterer") or {}).get("n_clusters", 0)
            prompts = (
                clusters * m.get("representatives_per_cluster", 0) * m.get("versions", 1) * len(m.get("splits", []))
            )
            ratio("mft", len(units.get("mft", [])), prompts, "representative prompted")
        elif job == "testaug":
            # per description the run prompted (one that kept no case counts, as zero)
            prompted = run / "stages" / "generate" / "data.parquet"
            descs = (
                set(pq.read_table(prompted, columns=["key"]).column("key").to_pylist())
                if prompted.exists()
                else {u["description"] for u in units.get("testaug", [])}
            )
            ratio("testaug", len(units.get("testaug", [])), len(descs), "description")
        elif job == "s2lct":
            seeds, exps = units.get("s2lct_seed", []), units.get("s2lct_expansion", [])
            # per capability the run asked for (one that found no seed counts, as zero)
            wanted = len(_s2lct_capabilities(cfg)) or len({u["capability"] for u in seeds})
            ratio("s2lct_seed", len(seeds), wanted, "capability")
            ratio("s2lct_expansion", len(exps), len(seeds), "seed")
        elif job == "costello":
            n_seeds = len(
                {r["text"] for g in ("costello_cr1", "costello_cr2", "costello_cr3") for r in units.get(g, [])}
            )
            # the seed sentences the run drew (the config's ``seeds`` is a cap the corpus may not fill)
            drawn = run / "stages" / "seeds" / "seeds.parquet"
            seeds = (
                pq.read_metadata(drawn).num_rows if drawn.exists() else (cfg.get("costello") or {}).get("seeds")
            ) or n_seeds
            for g in ("costello_cr1", "costello_cr2", "costello_cr3", "costello_cr4"):
                ratio(g, len(units.get(g, [])), seeds, "seed sentence")
    return out


def yields_command(args: argparse.Namespace) -> None:
    found = run_yields(Path(args.run))
    print(json.dumps(found, indent=1))
    for batch in args.record or []:
        mpath = meta_path(Path(batch))
        meta = json.loads(mpath.read_text(encoding="utf-8"))
        meta["yields"] = found
        mpath.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"recorded in {mpath}")


def show_command(args: argparse.Namespace) -> None:
    rows = [case for _, case in jsonl_records(args.batch)]
    for i, r in enumerate(rows[args.start : args.start + args.count], start=args.start):
        judged = "" if r.get("label_valid") is None else f"  [{r['label_valid']}{r['fluent']}{r['on_capability']}]"
        print(f"#{i} {r['capability']} | expect {r['expected']}{judged}")
        print(f"   text: {r['text']}" + (f"  ||  pair: {r['text_pair']}" if r.get("text_pair") else ""))
        if "closer" in r:
            print(f"   closer: {r['closer']}\n   farther: {r['farther']}")
        print(f"   source: {r['source']}")


def fill_command(args: argparse.Namespace) -> None:
    path = Path(args.batch)
    rows = [case for _, case in jsonl_records(path)]
    for number, line in enumerate(Path(args.verdicts).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(maxsplit=4)
        if len(parts) < 4 or not parts[0].isdigit() or any(p not in ("0", "1") for p in parts[1:4]):
            raise SystemExit(f"error: {args.verdicts}:{number}: expected 'INDEX L F C [note]', got {line!r}")
        i = int(parts[0])
        if i >= len(rows):
            raise SystemExit(f"error: {args.verdicts}:{number}: no case #{i} in {path} ({len(rows)} cases)")
        rows[i].update(dict(zip(VERDICTS, map(int, parts[1:4]))), note=parts[4] if len(parts) > 4 else "")
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = sum(r.get("label_valid") is not None for r in rows)
    print(f"{path}: {done} of {len(rows)} cases judged")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="draw a batch of one generator's cases from a run")
    s.add_argument("run")
    s.add_argument("--generator", required=True, choices=GENERATORS)
    s.add_argument("--n", type=int, default=100)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--part", choices=("dev", "final"), default="dev")
    s.add_argument("--out", required=True)
    s.add_argument("--config", default=None, help="the config the run used (recorded)")
    s.add_argument("--run-label", default=None, help="how the meta names the run (default: its path)")
    s.add_argument("--code-version", default=None, help="the code that generated the run (default: this checkout)")
    s.add_argument("--exclude", action="append", help="a batch whose cases are not drawn again")
    s.add_argument("--annotator", default="checkray maintainers")
    s.add_argument("--yields", default=None, help="JSON of the run's yields, recorded in the meta")
    s.set_defaults(func=sample_command)
    c = sub.add_parser("carry", help="every case of a generator in a run, carrying earlier batches' verdicts")
    c.add_argument("run")
    c.add_argument("--generator", required=True, choices=GENERATORS)
    c.add_argument("--out", required=True)
    c.add_argument(
        "--source", action="append", help="a batch whose verdicts are carried (default: every batch of the generator)"
    )
    c.add_argument("--config", default=None, help="the config the run used (recorded)")
    c.add_argument("--run-label", default=None, help="how the meta names the run (default: its path)")
    c.add_argument("--code-version", default=None, help="the code that generated the run (default: this checkout)")
    c.add_argument("--annotator", default="checkray maintainers")
    c.set_defaults(func=carry_command)
    r = sub.add_parser("sample-released", help="draw the COSTELLO authors' released triples")
    r.add_argument("file")
    r.add_argument("--n", type=int, default=50)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--part", choices=("dev", "final"), default="dev")
    r.add_argument("--out", required=True)
    r.add_argument("--annotator", default="checkray maintainers")
    r.set_defaults(func=sample_released_command)
    y = sub.add_parser("yields", help="print the yields of a run's generators (and record them in batches)")
    y.add_argument("run")
    y.add_argument("--record", action="append", help="a batch whose meta gets the yields")
    y.set_defaults(func=yields_command)
    w = sub.add_parser("show", help="print a batch's cases, numbered")
    w.add_argument("batch")
    w.add_argument("--start", type=int, default=0)
    w.add_argument("--count", type=int, default=1000)
    w.set_defaults(func=show_command)
    f = sub.add_parser("fill", help="merge verdicts (INDEX L F C [note] a line) into a batch")
    f.add_argument("batch")
    f.add_argument("verdicts")
    f.set_defaults(func=fill_command)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
