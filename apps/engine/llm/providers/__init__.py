"""One module per provider (building the request, parsing the response and the stream events):
`openai`, `anthropic`, `scripted` (the deterministic offline model, its script format in
`script`); `base` holds what they share."""
