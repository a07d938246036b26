"""Build configuration for the C parts (everything else is in pyproject.toml)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("traceforge._scanner", ["traceforge/_scanner.c"]),
    Extension("traceforge._counter_text", ["traceforge/_counter_text.c"]),
    Extension("traceforge._splice", ["traceforge/_splice.c"]),
    Extension("traceforge._stacks", ["traceforge/_stacks.c"]),
    Extension("traceforge._factorize", ["traceforge/_factorize.c"]),
    Extension("traceforge._replay", ["traceforge/_replay.c"]),
    Extension("traceforge._search", ["traceforge/_search.c"]),
])
