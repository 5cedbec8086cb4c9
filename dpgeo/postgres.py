"""Connections to PostgreSQL (PostGIS inputs and outputs): credentials stay with libpq and the owner.

A connection is given as a libpq connection string — a URL
(``postgresql://analyst@db.city.example/city``), ``key=value`` pairs
(``host=db dbname=city``) or a service name (``service=city``) — *without a
password*: libpq finds it itself in ``PGPASSWORD``, the password file
(``~/.pgpass``, ``PGPASSFILE``) or the service file (``~/.pg_service.conf``,
``PGSERVICEFILE``). A connection string holding a password is refused
(it would sit in the shell history and the process list).

Nothing here ever repeats a connection string, host, port, user or
password: not in an error message, not in a label, not in a ``repr``.
Connection failures are described by what went wrong and the fix only.

Examples
--------
>>> c = Connection.parse("postgresql://analyst@db.city.example:5433/city?table=stops")
>>> c.query, c
({'table': 'stops'}, Connection(<connection details hidden>))
>>> Connection.parse("postgresql://analyst:secret@db/city")
Traceback (most recent call last):
...
dpgeo.errors.InputError: the PostgreSQL connection string holds a password: leave it out and give it to libpq in ~/.pgpass, the PGPASSWORD environment variable or a service file (~/.pg_service.conf)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .errors import InputError

__all__ = ["Connection", "is_postgres", "need_psycopg", "quote_ident", "split_name"]

_SCHEMES = ("postgresql://", "postgres://")
#: Options of dpgeo's own in a connection URL's query (libpq would refuse them): removed before connecting.
OWN_OPTIONS = ("table", "sql", "geometry", "schema")


def is_postgres(value) -> bool:
    """Whether ``value`` is a PostgreSQL connection string (a ``postgresql://`` URL, or ``service=...``)."""
    if not isinstance(value, str):
        return False
    v = value.strip()
    return v.lower().startswith(_SCHEMES) or bool(re.match(r"^\s*(service|dbname|host)\s*=", v))


def need_psycopg():
    """The ``psycopg`` module (psycopg 3), or the one-line fix."""
    try:
        import psycopg
    except ImportError:
        raise InputError("reading or writing PostgreSQL needs psycopg 3 (the postgres extra): "
                         "pip install 'psycopg[binary]'") from None
    return psycopg


@dataclass(frozen=True)
class Connection:
    """A PostgreSQL connection string, kept out of every message and ``repr``.

    ``query`` holds dpgeo's own options found in a URL's query (``table=...``).
    """

    _conninfo: str = field(repr=False)
    query: dict = field(default_factory=dict, compare=False)

    def __repr__(self):
        return "Connection(<connection details hidden>)"

    @classmethod
    def parse(cls, conninfo) -> "Connection":
        if isinstance(conninfo, Connection):
            return conninfo
        if not is_postgres(conninfo):
            raise InputError("a PostgreSQL connection must be a postgresql:// URL or libpq key=value pairs "
                             "(host=... dbname=..., or service=NAME)")
        text = conninfo.strip()
        query = {}
        if text.lower().startswith(_SCHEMES):
            parts = urlsplit(text)
            if parts.password is not None:
                _refuse_password()
            keep = []
            for k, v in parse_qsl(parts.query, keep_blank_values=True):
                if k in OWN_OPTIONS:
                    query[k] = v
                elif k == "password":
                    _refuse_password()
                else:
                    keep.append(f"{k}={v}")
            text = urlunsplit(parts._replace(query="&".join(keep)))
        else:
            if re.search(r"(^|\s)password\s*=", text):
                _refuse_password()
        return cls(text, query)

    def connect(self, *, autocommit=False, what="the PostgreSQL database"):
        """A psycopg connection; a failure is one line saying what went wrong, never where or as whom."""
        psycopg = need_psycopg()
        try:
            return psycopg.connect(self._conninfo, autocommit=autocommit, connect_timeout=30,
                                   application_name="dpgeo")
        except psycopg.Error as exc:
            raise InputError(f"cannot connect to {what}: {connection_problem(exc)}") from None


def _refuse_password():
    raise InputError("the PostgreSQL connection string holds a password: leave it out and give it to libpq in "
                     "~/.pgpass, the PGPASSWORD environment variable or a service file (~/.pg_service.conf)")


def connection_problem(exc) -> str:
    """What a failed connection means, without the server's text (which names the host, port and user)."""
    text = str(exc).lower()
    if "password authentication failed" in text or "no password supplied" in text or "authentication" in text:
        return ("the server refused the login; give the password in ~/.pgpass, PGPASSWORD or a service file "
                "(not in the connection string)")
    if "does not exist" in text and "database" in text:
        return "the database named in the connection does not exist"
    if "does not exist" in text and "role" in text:
        return "the user named in the connection does not exist on the server"
    if "service" in text and ("definition" in text or "not found" in text):
        return "the service is not defined in the service file (~/.pg_service.conf or PGSERVICEFILE)"
    if "timeout" in text or "timed out" in text:
        return "the server did not answer in time"
    if "refused" in text or "could not connect" in text or "no such file" in text or "translate host" in text \
            or "resolve" in text:
        return "the server cannot be reached (is it running, and are the host and port right?)"
    if "ssl" in text:
        return "the secure connection (SSL) could not be set up"
    if "invalid" in text or "missing" in text or "syntax" in text:
        return "the connection string is not valid libpq syntax"
    return "the server refused the connection"


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, quoted (``"a""b"``)."""
    return '"' + str(name).replace('"', '""') + '"'


def split_name(name: str) -> tuple:
    """``(schema or None, table)`` of ``table`` or ``schema.table`` (a quoted part may hold a dot)."""
    parts = re.findall(r'"((?:[^"]|"")*)"|([^.]+)', str(name))
    vals = [(q.replace('""', '"') if q else p) for q, p in parts]
    if len(vals) == 1:
        return None, vals[0]
    if len(vals) == 2:
        return vals[0], vals[1]
    raise InputError(f"table {name!r} must be TABLE or SCHEMA.TABLE")
