"""Models of apps.specs (filled in by the issue that builds this app)."""
