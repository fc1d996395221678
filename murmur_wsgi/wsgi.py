"""``gunicorn murmur_wsgi.wsgi:app``: the door's WSGI module (``murmur_wsgi.door.wsgi``)."""
from murmur_wsgi.door.wsgi import app  # noqa: F401
