"""A minimal Django project with the murmur door mounted under /a2a (see a2a.py)."""
