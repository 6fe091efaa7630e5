"""gradviz's version, in the core layer so that any layer can read it (traces record it)."""

__version__ = "0.1.0"
