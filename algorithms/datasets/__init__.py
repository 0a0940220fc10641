"""Loaders for the real datasets listed in docs/datasets.md. Data comes only from registry packages,
downloaded at set-up time into the cache (never into the repository)."""
