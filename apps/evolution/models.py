"""Models of apps.evolution (filled in by the issue that builds this app)."""
