"""The WSGI callable gunicorn serves: ``djsite.wsgi:application`` (Django + the door at /a2a)."""
from djsite.a2a import build_application

application = build_application()
