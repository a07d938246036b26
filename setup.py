"""Build configuration for the C event scanner (everything else is in pyproject.toml)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("traceforge._scanner", ["traceforge/_scanner.c"])])
