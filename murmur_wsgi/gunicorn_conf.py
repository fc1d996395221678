"""``from murmur_wsgi.gunicorn_conf import *``: the door's gunicorn settings and hooks
(``murmur_wsgi.door.gunicorn_conf``), for configuration files written against this name."""
from murmur_wsgi.door.gunicorn_conf import *  # noqa: F401,F403
