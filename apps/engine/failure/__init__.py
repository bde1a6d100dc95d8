"""The failure chain of a react run — main attempt → Recovery → Emergency: `fallback` (the
Emergency rules that turn a failure into a stable error_code, message and suggestions), `structs`
(the error structs the engine itself ends a run with) and `recovery` (deciding on and starting
another attempt after a failed one, salvage of what the run changed)."""
