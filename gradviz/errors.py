"""gradviz's own exception and warning types (PyTorch's built-in types are used wherever
PyTorch raises them, so ``except RuntimeError`` keeps working)."""

__all__ = ["GradvizWarning", "TraceFormatError"]


class GradvizWarning(UserWarning):
    """A gradviz-specific warning (tests turn these into errors)."""


class TraceFormatError(ValueError):
    """A trace file is malformed or does not match the schema."""
