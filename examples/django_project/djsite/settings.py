"""Settings of the example site: no database, no apps, two views."""
import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
INSTALLED_APPS = []
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "djsite.urls"
WSGI_APPLICATION = "djsite.wsgi.application"
DATABASES = {}
USE_TZ = True
# Django sets the process's zone to TIME_ZONE (America/Chicago when unset): the server's
# logs (gunicorn's worker) keep UTC, as its master's do.
TIME_ZONE = "UTC"
