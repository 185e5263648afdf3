"""The `sparkqueue` console script (see docs/cli.md)."""

from . import commands, operations, serve  # noqa: F401 - each module registers its commands
from .app import app


def main() -> None:
    """The console script's entry point."""
    app()


__all__ = ["main"]
