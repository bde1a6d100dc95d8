"""Tooling for the repository's own checks (not shipped, not imported by apps/)."""
