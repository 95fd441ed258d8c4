"""Thin shim so legacy `pip install -e .` / `python setup.py develop` work; metadata lives in pyproject.toml."""
from setuptools import setup

setup()
