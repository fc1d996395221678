"""``gunicorn -k murmur_wsgi.worker.DoorWorker``: the door's worker (``murmur_wsgi.door.worker``)."""
from murmur_wsgi.door.worker import DoorWorker  # noqa: F401
