# gunicorn settings for `make run`: one gevent worker (see murmur_wsgi/gunicorn_conf.py).
from murmur_wsgi.gunicorn_conf import *  # noqa: F401,F403
