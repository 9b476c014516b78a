"""A child program that does nothing: `python -m exits_zero ANY`."""
