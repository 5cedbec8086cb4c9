"""A throw-away PostgreSQL server with PostGIS for the tests (real server, never mocked).

:func:`start_server` runs ``initdb`` in a temporary folder, starts ``postgres``
on a free port listening on 127.0.0.1 only (and a private Unix socket folder),
and makes a template database with the ``postgis`` extension; :meth:`PgServer.stop`
stops it and removes the folder. As root, the server runs as the ``postgres``
user (PostgreSQL refuses to run as root).

The server's superuser has a random name and a random password that reach
libpq only through a password file (``PGPASSFILE``): tests connect with URLs
that hold neither, as an owner would, and may scan every output for them.

The binaries are Debian's (``postgresql`` and ``postgis``; ``./dev/test`` installs
them as root), found through ``$DPGEO_PG_BIN``, ``pg_config --bindir`` or
``/usr/lib/postgresql/<version>/bin``. When no server can be started, tests marked
``postgres`` are skipped with the reason, unless ``DPGEO_REQUIRE_POSTGRES=1`` (CI):
then they fail.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field

REQUIRE_POSTGRES = os.environ.get("DPGEO_REQUIRE_POSTGRES", "") == "1"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server with PostGIS can be started here (the message says why)."""


def _bin_dir() -> str:
    env = os.environ.get("DPGEO_PG_BIN")
    if env:
        return env
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if
                   p.split("/")[-2].isdigit() else 0)
    for c in reversed(cands):
        if os.path.exists(os.path.join(c, "initdb")):
            return c
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and os.path.exists(os.path.join(out, "initdb")):
            return out
    raise PgUnavailable("PostgreSQL's server programs (initdb, pg_ctl) are not installed: "
                        "apt-get install postgresql postgis (./dev/test does it as root)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    """A running throw-away server: connect with :meth:`url` (no password in it: libpq reads PGPASSFILE)."""

    folder: str
    bindir: str
    port: int
    user: str
    password: str
    host: str = "127.0.0.1"
    as_user: list = field(default_factory=list)
    passfile: str = ""
    _n: int = 0

    def url(self, dbname="postgres", host=None, **query) -> str:
        """``postgresql://USER@127.0.0.1:PORT/DB?k=v`` (the password comes from the password file).

        ``host="localhost"`` names the server by a name that appears nowhere else (tests that scan outputs
        for the host).
        """
        from urllib.parse import urlencode

        q = ("?" + urlencode(query)) if query else ""
        return f"postgresql://{self.user}@{host or self.host}:{self.port}/{dbname}{q}"

    def connect(self, dbname="postgres", **kw):
        import psycopg

        return psycopg.connect(self.url(dbname), autocommit=True, **kw)

    def dump(self, dbname) -> str:
        """``pg_dump`` of a whole database (schema, comments and rows) as text, as a backup would hold it; no
        owner or privilege statements (they name the server's user, which is not the data's)."""
        r = subprocess.run([os.path.join(self.bindir, "pg_dump"), "--no-owner", "--no-privileges", "--dbname",
                            self.url(dbname)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"pg_dump failed: {r.stderr}")
        return r.stdout

    def new_database(self, prefix="city") -> str:
        """A fresh database with PostGIS (a copy of the template); returns its name."""
        self._n += 1
        name = f"{prefix}_{self._n}_{secrets.token_hex(3)}"
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE dpgeo_postgis_template')
        return name

    def stop(self):
        subprocess.run(self.as_user + [os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.folder, "data"),
                                       "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.passfile:
            shutil.rmtree(os.path.dirname(self.passfile), ignore_errors=True)


def start_server() -> PgServer:
    """Start a throw-away PostgreSQL server with PostGIS; raises :class:`PgUnavailable` with the reason."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise PgUnavailable("psycopg 3 is not installed (the postgres extra: pip install 'psycopg[binary]')") from None
    bindir = _bin_dir()
    as_user = []
    folder = tempfile.mkdtemp(prefix="dpgeo-pg-")
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as the postgres user
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise PgUnavailable("running as root and there is no 'postgres' user to run the server as") from None
        os.chown(folder, pw.pw_uid, pw.pw_gid)
        runuser = shutil.which("runuser") or shutil.which("su")
        as_user = [runuser, "-u", "postgres", "--"] if runuser.endswith("runuser") else None
        if as_user is None:
            raise PgUnavailable("running as root without runuser to start the server as 'postgres'")
    os.chmod(folder, 0o700)
    user = "owner_" + secrets.token_hex(4)
    password = secrets.token_hex(12)
    pwfile = os.path.join(folder, "pw")
    with open(pwfile, "w") as f:
        f.write(password + "\n")
    if as_user:
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    data = os.path.join(folder, "data")

    def run(args, what):
        res = subprocess.run(as_user + args, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise PgUnavailable(f"{what} failed: {(res.stderr or res.stdout).strip()[-500:]}")

    run([os.path.join(bindir, "initdb"), "-D", data, "-U", user, f"--pwfile={pwfile}", "--auth-local=trust",
         "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync", "--locale=C"], "initdb")
    os.unlink(pwfile)
    server = None
    for _ in range(3):  # a free port may be taken between finding it and the server binding it
        port = _free_port()
        res = subprocess.run(as_user + [os.path.join(bindir, "pg_ctl"), "-D", data, "-l",
                                        os.path.join(folder, "server.log"), "-w", "-t", "60", "-o",
                                        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                                        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
                                        "start"], capture_output=True, text=True, timeout=90)
        if res.returncode == 0:
            server = PgServer(folder, bindir, port, user, password, as_user=as_user)
            break
    if server is None:
        log = ""
        try:
            with open(os.path.join(folder, "server.log")) as f:
                log = f.read()[-500:]
        except OSError:
            pass
        shutil.rmtree(folder, ignore_errors=True)
        raise PgUnavailable(f"pg_ctl start failed: {log.strip()}")
    import atexit

    atexit.register(server.stop)  # also when a session or script ends without stopping it (stopping twice is fine)
    # the password reaches libpq through a password file only (PGPASSFILE), as for an owner's ~/.pgpass
    passdir = tempfile.mkdtemp(prefix="dpgeo-pgpass-")
    server.passfile = os.path.join(passdir, "pgpass")
    with open(server.passfile, "w") as f:
        f.write(f"127.0.0.1:{port}:*:{user}:{password}\nlocalhost:{port}:*:{user}:{password}\n")
    os.chmod(server.passfile, 0o600)
    os.environ["PGPASSFILE"] = server.passfile
    try:
        with server.connect() as conn:
            conn.execute("CREATE DATABASE dpgeo_postgis_template")
        with server.connect("dpgeo_postgis_template") as conn:
            conn.execute("CREATE EXTENSION postgis")
    except Exception as exc:
        server.stop()
        raise PgUnavailable(f"the PostGIS extension cannot be created (apt-get install postgis): {exc}") from None
    return server


def load_layer(server, dbname, table, gdf, *, srid=None, geometry="geom", geometry_type="Point"):
    """Copy a GeoDataFrame into a new PostGIS table ``table`` (its columns as text, ``date`` columns as
    ``timestamptz``), in order; returns the table name."""
    import shapely

    srid = srid or gdf.crs.to_epsg()
    cols = [c for c in gdf.columns if c != gdf.geometry.name]
    types = {c: ("timestamptz" if c in ("date", "reported_at") else
                 "bigint" if str(gdf[c].dtype).startswith("int") else "text") for c in cols}
    col_sql = "".join(f', "{c}" {types[c]}' for c in cols)
    with server.connect(dbname) as conn:
        conn.execute(f'CREATE TABLE "{table}" (id serial PRIMARY KEY, "{geometry}" geometry({geometry_type}, {srid})'
                     f"{col_sql})")
        wkb = shapely.to_wkb(shapely.set_srid(gdf.geometry.values, srid), hex=True, include_srid=True)
        with conn.cursor().copy(f'COPY "{table}" ("{geometry}"{"".join(f", {chr(34)}{c}{chr(34)}" for c in cols)})'
                                " FROM STDIN") as copy:
            values = [gdf[c].to_numpy() for c in cols]
            for i in range(len(gdf)):
                copy.write_row([wkb[i]] + [None if v[i] is None or v[i] != v[i] else str(v[i]) for v in values])
        conn.execute(f'ANALYZE "{table}"')
    return table
