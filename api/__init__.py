"""Front doors of the platform: the FastAPI gateway, the web provenance explorer and the
``consortia`` command line (docs/api.md)."""
