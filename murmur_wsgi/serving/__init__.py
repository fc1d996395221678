"""The WSGI plumbing both applications are served with."""
