"""Context lifecycle: the provider prefix cache (:mod:`adk_actors.context.cache`). See docs/CONTEXT.md."""
