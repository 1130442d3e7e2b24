"""Executors run steps somewhere (a local process pool; later Dask) and stream back records."""
