import os
import sys

try:
    from .cli.main import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: no traceback, nothing to clean up
    os.write(2, b"traceforge: interrupted\n")
    os._exit(130)


def run() -> None:
    """The ``traceforge`` command (and ``python -m traceforge``): the whole process."""
    code = main(process=True)
    if code > 128:  # stopped by a signal, and unwound: end now, not after waiting on workers stopped mid-reply
        try:
            sys.stdout.flush()
        except OSError:
            pass
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
