import sys

try:
    from .cli.main import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: no traceback
    sys.stderr.write("traceforge: interrupted\n")
    sys.exit(130)

sys.exit(main(process=True))
