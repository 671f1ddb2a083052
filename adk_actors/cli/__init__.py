"""The ``adk`` console script."""
