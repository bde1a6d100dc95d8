"""Models of apps.tools (filled in by the issue that builds this app)."""
