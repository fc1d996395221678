#!/usr/bin/env python
"""Django's command line for the example site (run it from examples/django_project/).

    python manage.py check
    gunicorn -c ../../conf/gunicorn.conf.py -b 127.0.0.1:8000 djsite.wsgi:application

``manage.py runserver`` (wsgiref) serves the mounted door too, for a try; serve it
with gunicorn as above (see docs/deploy.md).
"""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
