"""Error answers of the service: OGC API exception documents (RFC 7807 problem details).

Every error the service returns is one of these, built from a fixed title and
a detail that describes the request or the configuration — never the private
data. Unexpected failures become a generic 500 whose detail names nothing but
a reference for the server's log.
"""

from __future__ import annotations

__all__ = ["DPGEO", "OGC", "ApiError", "budget_problem", "problem"]

#: OGC API – Processes exception types.
OGC = "http://www.opengis.net/def/exceptions/ogcapi-processes-1/1.0/"
#: dpgeo's own problem types.
DPGEO = "urn:dpgeo:problem:"


def problem(status: int, kind: str, title: str, detail: str | None = None, **extra) -> dict:
    """An exception document (``type``, ``title``, ``status``, ``detail`` and extra members)."""
    doc = {"type": kind, "title": title, "status": int(status)}
    if detail:
        doc["detail"] = detail
    doc.update(extra)
    return doc


class ApiError(Exception):
    """An error answer: status, problem type, title and detail (plus extra members and headers)."""

    def __init__(self, status, kind, title, detail=None, headers=None, **extra):
        super().__init__(detail or title)
        self.status = int(status)
        self.doc = problem(status, kind, title, detail, **extra)
        self.headers = dict(headers or {})

    # the common ones ---------------------------------------------------------------------------------------------

    @classmethod
    def unauthorized(cls):
        return cls(401, DPGEO + "unauthorized", "Unauthorized",
                   "this needs a valid analyst token: send the header 'Authorization: Bearer <token>' (or HTTP "
                   "Basic with the token as the password)",
                   headers={"WWW-Authenticate": 'Bearer realm="dpgeo", Basic realm="dpgeo", charset="UTF-8"'})

    @classmethod
    def not_found(cls, what="resource"):
        return cls(404, DPGEO + "not-found", "Not found", f"no such {what}")

    @classmethod
    def invalid(cls, detail):
        return cls(400, DPGEO + "invalid-parameter", "Invalid parameter", detail)


def budget_problem(*, dataset, requested, total, spent, left) -> dict:
    """The 409 answer to a release that would take ``dataset`` past its total (exact values, Fractions)."""
    from ..budget import format_exact as f

    hint = (f"Use epsilon <= {f(left)}, or ask the data owner to raise the total." if left > 0
            else "No further release fits unless the data owner raises the total.")
    return problem(409, DPGEO + "budget-exceeded", "Privacy budget exceeded",
                   f"dataset {dataset!r} has a total budget of epsilon = {f(total)}; {f(spent)} is spent and {f(left)} "
                   f"is left, so a release with epsilon = {f(requested)} is refused and nothing was read or released. "
                   + hint,
                   dataset=dataset, requested_epsilon=float(requested), left_epsilon=float(left),
                   total_epsilon=float(total), spent_epsilon=float(spent))
