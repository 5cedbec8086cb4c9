import sys

from .cli import main

if __name__ == "__main__":  # not when a worker process (Dask, multiprocessing) imports this module
    sys.exit(main())
