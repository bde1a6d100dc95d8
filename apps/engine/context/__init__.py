"""What the model sees: `prompt` (the system prompt and its stable, cacheable layers) and
`compressor` (prompt size estimates and compression of old steps)."""
