"""``murmur-wsgi serve``: validate the door's manifest, then serve it under gunicorn -k gevent
(or Werkzeug with --dev)."""
from __future__ import annotations

import os
import sys

from murmur_wsgi.agents import AgentLoadError, resolve_agent
from murmur_wsgi.door.manifest import ManifestError, load_manifest_file
from murmur_wsgi.door.planes.files import check_root
from murmur_wsgi import running
from murmur_wsgi.serving.ports import UNBOUND, free_port, listen_refusal, port_number, why_not


def _listen(manifest, override: str | None) -> str:
    if override:
        host, sep, port = override.rpartition(":")
        if not sep or not port.isdigit():
            raise ManifestError(f"--listen: '{override}' is not HOST:PORT")
        if not (port.isascii() and not port.strip("0")):      # int(): 4,300 digits at most
            return override
        # NOTE: port 0 is chosen here, as for a manifest naming none: the server would take
        # one of its own, and the card and the running record would name port 0.
        port = None
    else:
        host = manifest.network["host"]
        port = manifest.network["internal_port"]
    if not port:
        try:
            port = free_port(host.strip("[]"))
        except UNBOUND as ex:
            named = "--listen" if override else "network.host"
            raise ManifestError(f"{named}: {host!r}: cannot listen there: "
                                f"{why_not(ex)}") from None
    # NOTE: an IPv6 address is bracketed, as --listen takes it: gunicorn reads ::1:41873
    # as the host :: and the port 1:41873.
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def main(args) -> int:
    """Validate the manifest, then run gunicorn -k gevent on it (or Werkzeug with --dev)."""
    # NOTE: the agent is imported from the current directory, as gunicorn does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        manifest = load_manifest_file(args.config)
        listen = _listen(manifest, args.listen)
        check_root(manifest.exports.get("files"), os.getcwd())
        resolve_agent(manifest)             # an agent that cannot be imported: one line
        refusal = listen_refusal(listen)
        if refusal:
            raise ManifestError(refusal)
        conf = args.gunicorn_conf
        # NOTE: checked here, as the manifest is: gunicorn would exit 1 with its own two lines.
        if conf is not None and not conf.startswith("python:") and not os.path.isfile(conf):
            raise ManifestError(f"--gunicorn-conf: {conf}: is not a file")
    except (ManifestError, AgentLoadError) as ex:
        print(f"murmur-wsgi: {ex}", file=sys.stderr)
        return 2
    if not args.listen and not manifest.network["internal_port"]:
        print(f"murmur-wsgi: the manifest names no port (network.internal_port): "
              f"listening on http://{listen}", file=sys.stderr)
    elif args.listen and listen != args.listen:
        print(f"murmur-wsgi: --listen names port 0: listening on http://{listen}",
              file=sys.stderr)
    os.environ["MURMUR_WSGI_CONFIG"] = os.path.abspath(args.config)
    os.environ["MURMUR_WSGI_LISTEN"] = listen
    # The door records itself under this pid: this process, which becomes gunicorn's master.
    os.environ[running.RECORD_ENV] = str(os.getpid())
    if args.dev:
        from murmur_wsgi import logs
        from murmur_wsgi.serving import devserver
        from murmur_wsgi.door.app import create_app
        logs.configure()                   # the door's logs as JSON lines on stderr
        host, _, port = listen.rpartition(":")
        # SIGTERM or SIGINT closes the door (answers held requests, ends streams), then
        # the server stops; the door removes its running record as it closes.
        return devserver.run(create_app(manifest, listen=listen), host.strip("[]"), port_number(port))
    conf = args.gunicorn_conf
    if conf is None:
        conf = "conf/gunicorn.conf.py" if os.path.exists("conf/gunicorn.conf.py") else \
            "python:murmur_wsgi.door.gunicorn_conf"
    argv = [sys.executable, "-m", "gunicorn", "-c", conf, "-b", listen, "murmur_wsgi.door.wsgi:app"]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return
