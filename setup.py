"""Install murmur_wsgi; metadata lives in setup.cfg."""
from setuptools import setup

setup()
