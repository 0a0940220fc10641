"""Loaders for the real datasets of DATASETS.md. Data comes only from registry packages,
downloaded at set-up time into the cache (never into the repository)."""
