import sys

from .harness.cli import main

if __name__ == "__main__":  # a spawned seed worker imports this module too: it must not run the CLI again
    sys.exit(main())
