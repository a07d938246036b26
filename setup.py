"""Build configuration for the C parts (everything else is in pyproject.toml).

The C extensions are optional: each has a pure-Python fallback (traceforge/_native/fallback),
so an extension that does not compile (no C compiler, an unsupported one) is reported and
left out, and the install goes on. TRACEFORGE_BUILD_NATIVE=0 leaves them all out on purpose
(and makes the wheel a pure-Python one). pip shows the warnings with `pip install -v`.
TRACEFORGE_REQUIRE_NATIVE=1 makes a failed extension an error instead (release wheels:
[tool.cibuildwheel] in pyproject.toml sets it).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = ["_scanner", "_counter_text", "_splice", "_stacks", "_factorize", "_replay", "_search"]
HEADERS = ["traceforge/_native/portable.h"]


def _native_wanted() -> bool:
    return os.environ.get("TRACEFORGE_BUILD_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def _native_required() -> bool:
    return os.environ.get("TRACEFORGE_REQUIRE_NATIVE", "0").strip().lower() in ("1", "true", "yes", "on")


def _warn(message: str) -> None:
    print(f"WARNING: traceforge: {message}", file=sys.stderr, flush=True)


class optional_build_ext(build_ext):
    """build_ext that reports an extension it cannot build and goes on without it."""

    def run(self):
        self._not_built = {}
        try:
            super().run()
        except Exception as exc:  # before any extension: e.g. no compiler for this platform at all
            if _native_required():
                raise
            for ext in self.extensions:
                if ext.name not in self._not_built and not os.path.exists(self.get_ext_fullpath(ext.name)):
                    self._report(ext, exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, DistutilsPlatformError (no MSVC), OSError, ...
            if _native_required():
                raise
            self._report(ext, exc)

    def _report(self, ext, exc):
        self._not_built[ext.name] = exc
        reason = " ".join(str(exc).split()) or "no message"
        if len(reason) > 200:  # a compiler's whole command line: its start and how it ended
            reason = reason[:90] + " ... " + reason[-90:]
        _warn(f"C extension {ext.name} not built ({type(exc).__name__}: {reason}); "
              "the pure-Python fallback will be used, slower")
        try:  # an older build of it must not be packaged in its place
            os.remove(self.get_ext_fullpath(ext.name))
        except OSError:
            pass


if _native_wanted() or _native_required():
    ext_modules = [
        # optional: setuptools then also tolerates the missing file (in-place / editable copies)
        Extension(f"traceforge._native.{name}", [f"traceforge/_native/{name}.c"], depends=HEADERS,
                  optional=not _native_required())
        for name in NATIVE
    ]
else:
    _warn("TRACEFORGE_BUILD_NATIVE=0: C extensions not built; the pure-Python fallbacks will be used, slower")
    ext_modules = []

setup(ext_modules=ext_modules, cmdclass={"build_ext": optional_build_ext})
