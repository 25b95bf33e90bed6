"""``checkray review``'s logic (engine/review.py), its ASGI app (jobs/review/app.py) and the
apply / export / import commands; no Ray, no browser (the browser test is test_browser.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

from checkray.engine.errors import InputError
from checkray.engine.review import (
    REVIEWS_FILE,
    ReviewConflict,
    ReviewStore,
    agreement,
    cohen_kappa,
    current,
    decision_row,
    estimate,
    per_case,
    stratified_sample,
    units_of_run,
    write_reviewed,
)
from checkray.jobs.cli import main
from checkray.jobs.review.app import ReviewApp
from checkray.jobs.review.job import review_units
from tests.review.runs import P, make_run


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "demo")


def _client(run: Path, reviewer: str = "alice", sample: int = 50):
    store = ReviewStore(run)
    app = ReviewApp(store, review_units(str(run), sample, "generator", 0, store), reviewer)
    return app, TestClient(app.asgi(), base_url="http://127.0.0.1:8123")


def test_units_cases_and_triples(run):
    units = units_of_run(run)
    gens = {u["generator"] for u in units}
    assert gens == {"templates", "costello_cr1"}
    triple = next(u for u in units if u["kind"] == "triple")
    assert triple["case_id"] == "triple0" and triple["closer"].startswith("the film is great")
    assert sum(u["kind"] == "triple" for u in units) == 6


def test_stratified_sample_reaches_every_generator_first(run):
    units = units_of_run(run)
    picked = stratified_sample(units, 4, "generator", seed=1)
    assert {u["generator"] for u in picked[:2]} == {"templates", "costello_cr1"}
    by_cap = stratified_sample(units, 4, "capability", seed=1)
    assert len({(u["generator"], u["capability"]) for u in by_cap}) == 4
    assert [u["case_id"] for u in stratified_sample(units, 10, seed=3)] == [
        u["case_id"] for u in stratified_sample(units, 10, seed=3)
    ]
    with pytest.raises(InputError, match="--by"):
        stratified_sample(units, 4, "topic")


def test_kappa():
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
    assert cohen_kappa([], []) is None
    # the textbook example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_store_refuses_foreign_directories(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "suite.parquet").write_text("x")
    with pytest.raises(InputError, match="not a directory checkray wrote"):
        ReviewStore(plain)
    run = make_run(tmp_path / "demo")
    (run / REVIEWS_FILE).write_text("a user's file")
    with pytest.raises(InputError, match="checkray did not write it"):
        ReviewStore(run)


def test_decisions_append_revisions_undo_and_stale(run):
    store = ReviewStore(run)
    unit = units_of_run(run)[0]
    store.append([decision_row(unit, "alice", {"decision": "accept"})], expected={})
    with pytest.raises(ReviewConflict):  # a page that saw no decision yet
        store.append([decision_row(unit, "alice", {"decision": "skip"})], expected={(unit["case_id"], "alice"): 0})
    store.append(
        [decision_row(unit, "alice", {"decision": "reject", "reason": "not fluent"})],
        expected={(unit["case_id"], "alice"): 1},
    )
    now = current(store.rows())[(unit["case_id"], "alice")]
    assert (now["decision"], now["fluent"], now["label_valid"], now["revision"]) == ("reject", 0, 1, 2)
    store.append([decision_row(unit, "alice", {"decision": "undo"})])
    assert current(store.rows())[(unit["case_id"], "alice")]["decision"] == "accept"
    assert len(store.rows()) == 3  # nothing is ever rewritten: the history stays
    marker = json.loads((run / ".checkray-run.json").read_text())
    assert REVIEWS_FILE in marker["owned"]


def test_estimate_and_agreement(run):
    store = ReviewStore(run)
    units = [u for u in units_of_run(run) if u["generator"] == "templates"][:10]
    for i, u in enumerate(units):
        store.append([decision_row(u, "alice", {"decision": "accept" if i < 8 else "reject", "reason": "unusable"})])
        store.append([decision_row(u, "bob", {"decision": "accept" if i < 7 else "reject", "reason": "unusable"})])
    rows = estimate(store.rows(), units_of_run(run))
    top = next(r for r in rows if r["generator"] == "templates" and r["capability"] == "")
    assert top["reviewed"] == 10 and top["units"] == 30
    assert top["all_three"] == pytest.approx(0.7)  # bob decided last: his decision stands
    assert top["all_three_text"].startswith("70.0 % [")
    assert any(r["capability"] == "Negation" for r in rows)
    pair = agreement(store.rows())[0]
    assert pair["reviewers"] == "alice / bob" and pair["cases"] == 10 and pair["agree"] == 9
    assert pair["decision_kappa"] == pytest.approx(cohen_kappa([1] * 8 + [0] * 2, [1] * 7 + [0] * 3))


def test_apply_writes_the_reviewed_suite(run):
    store = ReviewStore(run)
    by = {u["case_id"]: u for u in units_of_run(run)}
    cases = [u for u in by.values() if u["kind"] == "case"]
    reject, relabel, edit = cases[0], cases[2], cases[4]
    store.append(
        [
            decision_row(reject, "alice", {"decision": "reject", "reason": "wrong label"}),
            decision_row(relabel, "alice", {"decision": "relabel", "new_label": "positive"}),
            decision_row(edit, "alice", {"decision": "edit", "new_text": "An edited case."}),
            decision_row(by["triple0"], "alice", {"decision": "reject", "reason": "off capability"}),
            decision_row(by["triple1"], "alice", {"decision": "relabel", "new_label": "farther"}),
        ]
    )
    lines = {line["job"]: line for line in write_reviewed(run)}
    suite = pq.read_table(run / "templates" / "reviewed_suite.parquet").to_pylist()
    assert len(suite) == 29 and reject["case_id"] not in {r["case_id"] for r in suite}
    row = {r["case_id"]: r for r in suite}
    assert row[relabel["case_id"]]["expected_label"] == "positive"
    meta = json.loads(row[relabel["case_id"]]["meta"])
    assert meta["review"]["decision"] == "relabel" and meta["original_expected_label"] == "negative"
    assert row[edit["case_id"]]["text"] == "An edited case."
    assert lines["templates"]["reject"] == 1 and lines["costello"]["relabel"] == 1
    triples = pq.read_table(run / "costello" / "reviewed_triples.parquet").to_pylist()
    assert len(triples) == 15  # triple0's three rows out
    swapped = [r for r in triples if json.loads(r["meta"])["triple"] == "triple1"]
    assert {r["relation"] for r in swapped if r["text"].startswith("the film is great")} == {"farther"}
    manifest = json.loads((run / "templates" / "manifest.json").read_text())
    assert "reviewed_suite.parquet" in manifest["published"] and manifest["reviewed"]["reject"] == 1
    assert "reviewed_validity.parquet" in manifest["published"] and len(manifest["reviewed"]["of_sha256"]) == 64
    validity = pq.read_table(run / "templates" / "reviewed_validity.parquet").to_pylist()
    assert sum(r["cases"] for r in validity) == 29
    top = {r["capability"]: r for r in validity}
    # three templates cases reviewed: one rejected for its label, one relabelled, one edited
    assert all(r["judged"] == 3 and r["basis"] == "generator" for r in validity)
    assert top["Vocabulary"]["label_valid"] == pytest.approx(1 / 3) and top["Vocabulary"]["fluent"] == pytest.approx(
        2 / 3
    )


def test_app_needs_token_and_loopback_host(run):
    app, client = _client(run)
    assert client.get("/").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    page = client.get(f"/?token={app.token}")
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    assert "script-src 'nonce-" in page.headers["Content-Security-Policy"]
    assert client.get("/api/state").status_code == 403
    evil = client.get("/api/state", headers={"X-Review-Token": app.token, "Host": "evil.example:8123"})
    assert evil.status_code == 403
    ok = client.get("/api/state", headers={"X-Review-Token": app.token})
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("application/json")


def test_app_page_never_holds_case_text(run):
    """Case text reaches the page only as JSON the script puts in as text."""
    app, client = _client(run)
    page = client.get(f"/?token={app.token}").text
    assert "alert(1)" not in page and "onerror" not in page
    assert "innerHTML" not in page and "insertAdjacentHTML" not in page and "document.write" not in page
    state = client.get("/api/state", headers={"X-Review-Token": app.token}).json()
    assert any(P in u["text"] for u in state["units"])


def test_app_decisions_stale_pages_and_errors(run):
    app, client = _client(run)
    h = {"X-Review-Token": app.token}
    state = client.get("/api/state", headers=h).json()
    first = state["units"][0]["case_id"]
    r = client.post("/api/decide", json={"case_id": first, "decision": "accept", "revision": 0}, headers=h)
    assert r.status_code == 200 and r.json()["progress"]["decided"] == 1
    stale = client.post("/api/decide", json={"case_id": first, "decision": "skip", "revision": 0}, headers=h)
    assert stale.status_code == 409 and stale.json()["stale"]
    assert current(ReviewStore(run).rows())[(first, "alice")]["decision"] == "accept"
    bad = [
        {"case_id": "nope", "decision": "accept"},
        {"case_id": first, "decision": "burn", "revision": 1},
        {"case_id": first, "decision": "reject", "revision": 1},
        {"case_id": first, "decision": "relabel", "new_label": "<b>", "revision": 1},
        {"case_id": first, "decision": "edit", "new_text": " ", "revision": 1},
    ]
    for body in bad:
        assert client.post("/api/decide", json=body, headers=h).status_code == 400, body
    assert client.post("/api/decide", content=b"x", headers={**h, "Content-Type": "text/plain"}).status_code == 415
    # a second reviewer on the same run: agreement shows
    r = client.post(
        "/api/decide", json={"case_id": first, "decision": "accept", "revision": 0, "reviewer": "bob"}, headers=h
    )
    assert r.json()["agreement"][0]["cases"] == 1


def test_export_import_roundtrip_and_errors(run, tmp_path, capsys):
    out = tmp_path / "sample.csv"
    main(["review", "export", str(run), "--out", str(out), "--sample", "6"])
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 6 and rows[0]["decision"] == ""
    rows[0]["decision"] = "accept"
    rows[1]["decision"], rows[1]["reason"] = "reject", "wrong label"
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    main(["review", "import", str(run), str(out), "--reviewer", "carol"])
    decided = per_case(ReviewStore(run).rows())
    assert decided[rows[0]["case_id"]]["reviewer"] == "carol" and decided[rows[1]["case_id"]]["label_valid"] == 0

    jl = tmp_path / "their.jsonl"
    jl.write_text(json.dumps({"case_id": "unknown", "decision": "accept"}) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["review", "import", str(run), str(jl)])
    assert exc.value.code == 2
    assert "their.jsonl:1: unknown case id 'unknown'" in capsys.readouterr().err.splitlines()[-1]
    cid = rows[0]["case_id"]
    jl.write_text(
        json.dumps({"case_id": cid, "decision": "accept"}) + "\n" + json.dumps({"case_id": cid, "decision": "skip"})
    )
    with pytest.raises(SystemExit):
        main(["review", "import", str(run), str(jl)])
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("error: ") and "their.jsonl:2:" in line and "conflicting decisions" in line


def test_apply_command_without_reviews_is_one_line(run, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["review", "apply", str(run)])
    assert exc.value.code == 2 and "no reviews yet" in capsys.readouterr().err


def test_reviews_as_an_annotation_batch(run, tmp_path):
    from checkray.engine.suite_validity import read_batch, summarize

    store = ReviewStore(run)
    by = {u["case_id"]: u for u in units_of_run(run)}
    cases = [u for u in by.values() if u["kind"] == "case"][:4]
    store.append([decision_row(u, "alice", {"decision": "accept"}) for u in cases[:3]])
    store.append([decision_row(cases[3], "alice", {"decision": "reject", "reason": "not fluent"})])
    store.append([decision_row(by["triple2"], "alice", {"decision": "accept"})])
    store.append([decision_row(cases[0], "alice", {"decision": "skip"})])  # a skip has no verdict
    out = tmp_path / "b" / "review-batch.jsonl"
    main(["review", "batch", str(run), "--out", str(out)])
    batch = read_batch(out)
    assert batch.part == "dev" and batch.meta["annotator"] == "alice"
    rows = {r.generator: r for r in summarize(batch.cases, by_capability=False)}
    assert rows["templates"].shares["fluent"].k == 2 and rows["templates"].n == 3
    assert rows["costello_cr1"].n == 1
    assert "closer" in next(c.row for c in batch.cases if c.generator == "costello_cr1")


def test_apply_drops_perturbations_of_a_rejected_original():
    from checkray.engine.benchmark.inputs import check_suite
    from checkray.engine.review import apply_reviews
    from checkray.engine.schema import make_cases

    base = {"suite": "s", "method": "template", "capability": "Robustness"}
    table = make_cases(
        [
            {**base, "case_id": "o", "text": "good film", "test_type": "INV"},
            {**base, "case_id": "p", "text": "good flim", "test_type": "INV", "perturbs": "o", "relation": "same"},
            {**base, "case_id": "q", "text": "fine", "expected_label": "positive", "test_type": "MFT"},
        ]
    )
    out, counts = apply_reviews("templates", table, {"o": {"decision": "reject", "reason": "unusable"}})
    assert out.column("case_id").to_pylist() == ["q"] and counts["dropped with their original"] == 1
    check_suite(out, "reviewed")


def test_an_inv_case_is_not_relabelled():
    from checkray.engine.review import check_decision

    unit = {"case_id": "p", "kind": "case", "test_type": "INV"}
    with pytest.raises(InputError, match="expects a relation"):
        check_decision(unit, "p", {"decision": "relabel", "new_label": "positive"}, ["negative", "positive"])
