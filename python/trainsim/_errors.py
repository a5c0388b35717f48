"""The exceptions trainsim raises (docs/python.md "Errors")."""

from __future__ import annotations


class SpecError(ValueError):
    """Bad input: a spec file, dict or argument the CLI would refuse with exit code 2.

    ``source`` names the input (a file's path, "topology dict", "--top"); ``diagnostics`` lists
    every problem as ``(source, json_pointer, message)``; ``str(error)`` is the CLI's message.
    """

    def __init__(self, message: str, source: str = "", diagnostics: list[tuple[str, str, str]] | None = None):
        super().__init__(message)
        self.message = message
        self.source = source
        self.diagnostics = list(diagnostics or [])

    @property
    def pointer(self) -> str:
        """The JSON pointer of the first problem ("" when the whole input is at fault)."""
        return self.diagnostics[0][1] if self.diagnostics else ""


class DoesNotFitError(RuntimeError):
    """A plan whose memory peak exceeds the device's, where it cannot be priced (``goodput``).

    The CLI exits 1 for the same plan. ``run`` does not raise: its report says ``fits``.
    """
