"""Short previews of longer texts."""
