"""The review page: a Starlette (ASGI) app served by uvicorn on the loopback interface.

Every request needs the server's token (the page's URL carries it; the page sends it back
in the ``X-Review-Token`` header), a ``Host`` of the loopback address (no DNS rebinding),
and case text reaches the page only as JSON that the page's script puts into the DOM as
text (``textContent``), under a Content-Security-Policy that runs no script but the page's
own. Each decision is appended to ``reviews.parquet`` before the answer is sent
(``engine/review.py``: atomic, locked); a decision made on an older revision of a case
than the one on disk is refused (409), so a stale tab never overwrites a newer decision.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from checkray.engine.errors import InputError
from checkray.engine.review import (
    REASONS,
    ReviewConflict,
    ReviewStore,
    agreement,
    check_decision,
    current,
    decision_row,
    estimate,
    labels_of,
)
from checkray.engine.suite_validity import load_estimates

TOKEN_HEADER = "X-Review-Token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
MAX_BODY = 64 * 1024
MAX_REVIEWER = 64


def _render_page(nonce: str, title: str, run: str) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("checkray.engine", "html"), autoescape=jinja2.select_autoescape(["html", "j2"])
    )
    return env.get_template("review.html.j2").render(nonce=nonce, title=title, run=run)


class ReviewApp:
    """The state of one review server: the run's store, the units on offer, the token."""

    def __init__(self, store: ReviewStore, units: Sequence[dict[str, Any]], reviewer: str, token: str | None = None):
        self.store = store
        self.units = list(units)
        self.by_id = {u["case_id"]: u for u in self.units}
        self.labels = labels_of(self.units)
        self.shipped = load_estimates()  # the estimates the reports show, for comparison
        self.reviewer = reviewer
        self.token = token or secrets.token_urlsafe(24)

    # --- checks every request passes
    def _refused(self, request: Request, token: str | None) -> Response | None:
        host = (request.headers.get("host") or "").rsplit(":", 1)[0] if request.headers.get("host") else ""
        if host not in LOOPBACK_HOSTS:
            return JSONResponse({"error": "this server answers on the loopback address only"}, status_code=403)
        if not token or not secrets.compare_digest(token.encode(), self.token.encode()):
            return JSONResponse({"error": "missing or wrong token: open the URL the server printed"}, status_code=403)
        return None

    def _reviewer(self, value: Any) -> str:
        name = str(value or self.reviewer).strip()
        if not name or len(name) > MAX_REVIEWER:
            raise InputError(f"reviewer name must be 1 to {MAX_REVIEWER} characters")
        return name

    def state(self, reviewer: str, with_units: bool = True) -> dict[str, Any]:
        """What the page shows; after a decision, without the units it already holds."""
        rows = self.store.rows()
        standing = current(rows)
        mine = {c: r for (c, who), r in standing.items() if who == reviewer and c in self.by_id}
        revisions: dict[str, int] = {}
        for r in rows:
            if r["reviewer"] == reviewer:
                revisions[r["case_id"]] = max(revisions.get(r["case_id"], 0), int(r["revision"]))
        out = {
            "reviewer": reviewer,
            "units": self.units if with_units else None,
            "labels": self.labels,
            "reasons": list(REASONS),
            "decisions": {
                c: {k: r.get(k) for k in ("decision", "reason", "new_label", "new_text", "time")}
                for c, r in mine.items()
            },
            "revisions": revisions,
            "estimate": estimate(rows, self.units, self.shipped),
            "agreement": agreement(rows),
            "progress": {"decided": sum(r["decision"] != "skip" for r in mine.values()), "total": len(self.units)},
        }
        return out

    # --- endpoints
    async def page(self, request: Request) -> Response:
        refused = self._refused(request, request.query_params.get("token"))
        if refused is not None:
            return HTMLResponse("<!doctype html><title>refused</title><p>Open the URL the server printed.", 403)
        nonce = secrets.token_urlsafe(16)
        html = _render_page(nonce, "checkray review", str(self.store.root))
        return HTMLResponse(html, headers=_headers(nonce))

    async def api_state(self, request: Request) -> Response:
        refused = self._refused(request, request.headers.get(TOKEN_HEADER))
        if refused is not None:
            return refused
        try:
            reviewer = self._reviewer(request.query_params.get("reviewer"))
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(self.state(reviewer), headers=_headers())

    async def api_decide(self, request: Request) -> Response:
        refused = self._refused(request, request.headers.get(TOKEN_HEADER))
        if refused is not None:
            return refused
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send JSON"}, status_code=415)
        body = await request.body()
        if len(body) > MAX_BODY:
            return JSONResponse({"error": "decision too large"}, status_code=413)
        try:
            import json

            data = json.loads(body)
            if not isinstance(data, dict):
                raise InputError("a decision is a JSON object")
            reviewer = self._reviewer(data.get("reviewer"))
            case_id = str(data.get("case_id") or "")
            unit = self.by_id.get(case_id)
            if data.get("decision") != "undo":
                check_decision(unit, case_id, data, self.labels)
            elif unit is None:
                raise InputError(f"unknown case id {case_id!r}")
            seen = int(data.get("revision") or 0)
            self.store.append([decision_row(unit, reviewer, data)], expected={(case_id, reviewer): seen})
        except ReviewConflict as exc:
            return JSONResponse({"error": str(exc), "stale": True}, status_code=409)
        except (InputError, ValueError, TypeError) as exc:
            return JSONResponse({"error": str(exc).splitlines()[0]}, status_code=400)
        return JSONResponse(self.state(reviewer, with_units=False), headers=_headers())

    def asgi(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.page, methods=["GET"]),
                Route("/api/state", self.api_state, methods=["GET"]),
                Route("/api/decide", self.api_decide, methods=["POST"]),
            ]
        )


def _headers(nonce: str | None = None) -> dict[str, str]:
    out = {
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",  # the URL carries the token
        "X-Frame-Options": "DENY",
    }
    if nonce is not None:
        out["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    return out
