"""The pure core: typed models, CEL, the allocator, quota charging and gang decisions.

Nothing below this package performs I/O or imports the shell (kopf, kubernetes, aiohttp, the CLI);
an import-linter contract in pyproject.toml enforces that.
"""
