"""Command line: `draq` (also `kubectl draq`)."""
