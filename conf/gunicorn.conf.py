# gunicorn settings for `make run` and `murmur-wsgi serve`: one gevent worker, no preload, and
# the hooks that refuse a second worker, write JSON logs and close the door on SIGTERM.
# Override settings below the import; keep the hooks (see murmur_wsgi/door/gunicorn_conf.py).
from murmur_wsgi.door.gunicorn_conf import *  # noqa: F401,F403
