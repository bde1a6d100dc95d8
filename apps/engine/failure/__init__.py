"""The failure chain of a react run — main attempt → Recovery → Emergency: `fallback` (error
structs, the emergency rules that turn a failure into a stable error, fallback models) and
`recovery` (deciding on and starting another attempt after a failed one, salvage)."""
