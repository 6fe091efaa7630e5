"""Print the widget protocol's TypeScript types:
``python -m gradviz.widget.protocol > labextension/src/generated/widget_protocol.ts``."""

from ._protocol import main, typescript

__all__ = ["typescript"]

if __name__ == "__main__":
    raise SystemExit(main())
