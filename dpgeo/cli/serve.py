"""``dpgeo serve``: run the private-map service (OGC API – Processes and Features) from a TOML configuration.

Also ``dpgeo serve --new-token NAME``, which prints a fresh bearer token for an
analyst and the ``[analysts.NAME]`` table (with the token's SHA-256 only) to
paste into the configuration. Needs the ``serve`` extra.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]

_EXAMPLES = """\
examples:
  # make a token for the analyst alice: give her the token, paste the table into the configuration
  dpgeo serve --new-token alice
  # check a configuration and exit
  dpgeo serve service.toml --check
  # serve on 127.0.0.1:8080 (put a TLS reverse proxy in front, see docs/service.md)
  dpgeo serve service.toml --port 8080
"""


def register(subparsers):
    """Add ``serve`` to the ``dpgeo`` command's subparsers."""
    sp = subparsers.add_parser(
        "serve", help="run the private-map service (OGC API - Processes and Features)",
        description="Serve DP releases of private point data over OGC API - Processes (run a mechanism, with a "
                    "token, within each dataset's total budget) and OGC API - Features (the published releases).",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sp.add_argument("config", nargs="?", metavar="CONFIG", help="the service's TOML configuration")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    sp.add_argument("--check", action="store_true", help="check the configuration and exit")
    sp.add_argument("--new-token", metavar="NAME", default=None,
                    help="print a new token for analyst NAME and its [analysts.NAME] table, then exit")
    sp.add_argument("--forwarded-allow-ips", default=None, metavar="IPS",
                    help="reverse proxies whose X-Forwarded-* headers are trusted, comma-separated (default: the "
                         "configuration's [server] trusted_proxies; none: the headers are ignored)")
    sp.set_defaults(func=_cmd_serve)


def _cmd_serve(args):
    from ..errors import ParameterError

    if args.new_token is not None:
        return _new_token(args.new_token)
    if args.config is None:
        raise ParameterError("give the configuration file (dpgeo serve CONFIG), or --new-token NAME")
    if not 0 < args.port < 65536:
        raise ParameterError(f"--port must be in 1..65535, got {args.port}")
    try:
        import uvicorn

        from ..server import create_app, load_config
    except ImportError as exc:
        raise ParameterError(f"dpgeo serve needs the serve extra ({exc.name} is missing): "
                             "pip install fastapi uvicorn (from a dpgeo checkout: pip install '.[serve]')") from None
    config = load_config(args.config)
    if args.check:
        from ..server.config import ledger_notice, seed_notice

        info, warning = ledger_notice(config.server)
        print(f"{config.path}: {len(config.datasets)} dataset(s), {len(config.analysts)} analyst(s); "
              f"ledger {config.server.ledger}; releases in {config.server.releases}", file=sys.stderr)
        print(info, file=sys.stderr)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
        if seed_notice(config.server):
            print(f"warning: {seed_notice(config.server)}", file=sys.stderr)
        return 0
    _logging()
    _log_ledger(config)
    app = create_app(config)
    proxies = args.forwarded_allow_ips
    if proxies is None:
        proxies = ",".join(config.server.trusted_proxies)
    server = _uvicorn_server()(uvicorn.Config(app, host=args.host, port=args.port, log_config=None, access_log=False,
                                   proxy_headers=bool(proxies), forwarded_allow_ips=proxies or None,
                                   server_header=False, timeout_graceful_shutdown=5))
    server.stop_jobs = getattr(app, "abort_jobs", None)
    server.run()
    return 0


def _uvicorn_server():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, which also stops the running jobs' workers as soon as it is told to exit."""

        stop_jobs = None

        def handle_exit(self, sig, frame):
            if self.stop_jobs is not None:
                self.stop_jobs()
            super().handle_exit(sig, frame)

    return Server


def _log_ledger(config):
    """Say at start which privacy-budget ledger the service charges (and when it is not the machine's one)."""
    import logging

    from ..server.config import ledger_notice

    info, warning = ledger_notice(config.server)
    log = logging.getLogger("dpgeo.server")
    log.info("%s", info)
    if warning:
        log.warning("%s", warning)


def _logging():
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("dpgeo.server", "uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.setLevel(logging.INFO)
        lg.propagate = False
    # the owner's exact diagnostics never reach the service log (workers send them to owner_log, if configured)
    owner = logging.getLogger("dpgeo.owner")
    owner.handlers[:] = [logging.NullHandler()]
    owner.propagate = False


def _new_token(name):
    from ..errors import ParameterError
    from ..server.auth import new_token
    from ..server.config import NAME_PATTERN

    if not NAME_PATTERN.match(name):
        raise ParameterError("an analyst name is 1-64 letters, digits, '_', '-' or '.', starting with a letter or "
                             "digit")
    token, digest = new_token()
    print(f"token for {name} (give it to them over a private channel; it is shown only now):", file=sys.stderr)
    print(token, file=sys.stderr)
    print(f"[analysts.{name}]\ntoken_sha256 = \"{digest}\"\ndatasets = []")
    return 0
