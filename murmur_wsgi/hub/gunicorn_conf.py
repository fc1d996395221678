"""gunicorn settings for the hub: the shared ones (a gevent worker, a clean stop), draining hubs.

The settings and the process groups' hooks both applications share are
``serving/gunicorn_base.py``'s; the worker is the hub's own (``hub/worker.py``:
the read deadlines of hub.yaml's ``limits``), with the shared stop
(``serving/shutdown.py``).

On SIGTERM the worker stops accepting; the hook below drains the hub on a
thread of its own (``drain_timeout_secs`` for runs in flight, background ones
included, then FAILED "interrupted"), so held requests get their answer and
every stream its final event while gunicorn waits for the connections, and
the worker's exit waits for the drain to finish.
"""
import os
import threading

from murmur_wsgi.serving.gunicorn_base import *  # noqa: F401,F403 - shared settings and hooks
from murmur_wsgi.serving.gunicorn_base import child_exit as _groups_child_exit
from murmur_wsgi.serving.gunicorn_base import on_exit as _groups_on_exit
from murmur_wsgi.serving.shutdown import WorkerStop

# gunicorn's gevent worker, with hub.yaml's deadlines on reading a request
# (limits.header_timeout_secs, limits.body_timeout_secs) and a reserve of connections.
worker_class = "murmur_wsgi.hub.worker.HubWorker"
bind = [os.environ.get("MURMUR_WSGI_LISTEN", "127.0.0.1:41880")]


def _drain_secs() -> float:
    """The served hub.yaml's drain_timeout_secs (20 when it cannot be read here)."""
    from murmur_wsgi.hub.config import CONFIG_ENV, ConfigError, load_config_file

    try:
        return load_config_file(os.environ.get(CONFIG_ENV, "conf/hub.yaml")).drain_timeout_secs
    except ConfigError:
        return 20.0


# NOTE: gunicorn's own bound on a stopping worker: the drain, plus time to answer and exit.
graceful_timeout = max(30, int(_drain_secs()) + 10)


class _HubStop(WorkerStop):
    """Drains the worker's hubs, on a thread of its own, as the worker stops."""

    drain = None

    def close_apps(self) -> None:
        from murmur_wsgi.hub.app import live_hubs

        def drain():
            for hub in live_hubs():
                try:
                    hub.close()
                except Exception:  # noqa: BLE001 - one hub failing must not keep the rest
                    self.worker.log.exception("murmur-wsgi: closing the hub failed")
        self.drain = threading.Thread(target=drain, name="hub-drain", daemon=True)
        self.drain.start()

    def run(self):
        try:
            self._run()
        finally:
            self.close()
            if self.drain is not None:
                self.drain.join(60)


def post_worker_init(worker):
    _HubStop(worker).install()


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"     # prometheus_client's multiprocess mode


def _config():
    from murmur_wsgi.hub.config import CONFIG_ENV, ConfigError, load_config_file

    try:
        return load_config_file(os.environ.get(CONFIG_ENV, "conf/hub.yaml"))
    except ConfigError:
        return None                 # the worker reports the bad file


def _shared_store() -> bool:
    """The hub's store is shared by processes (Redis): any number of workers may serve."""
    config = _config()
    return config is not None and config.shared


def on_starting(server):
    """Refuse more than one worker on the memory store, which lives in one process; give
    the workers one folder for their metrics (set before they fork and import the client)."""
    config = _config()
    if server.cfg.workers != 1 and not (config is not None and config.shared):
        raise SystemExit("murmur-wsgi: the hub's memory store lives in one process; run "
                         f"gunicorn with workers = 1 (got {server.cfg.workers}), or set "
                         "store: redis://host:port/db to serve with more")
    if config is not None and config.metrics["enabled"] and not os.environ.get(MULTIPROC_ENV):
        import tempfile

        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="murmur-hub-metrics-")
        server.metrics_folder = os.environ[MULTIPROC_ENV]


def child_exit(server, worker):  # noqa: F811 - the process groups', then the worker's metrics
    _groups_child_exit(server, worker)
    if getattr(server, "metrics_folder", None):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server):  # noqa: F811 - the process groups', then the metrics folder
    _groups_on_exit(server)
    folder = getattr(server, "metrics_folder", None)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def nworkers_changed(server, new_value, old_value):
    if old_value is not None and new_value > 1 and not _shared_store():
        server.log.error("murmur-wsgi: the hub's memory store lives in one process; "
                         "staying at 1 worker")
        server.num_workers = 1
