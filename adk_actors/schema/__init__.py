"""JSON Schema at the boundary: normalization, cached compilation, strict validation, the Gemini projection.

::

    from adk_actors.schema import compile_schema, gemini_function_declaration

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    args = compile_schema(schema).validate({"city": "Oslo"})      # SchemaError(reason="invalid_arguments")
    gemini_function_declaration("get_weather", "Weather for a city", schema)
    # {"name": ..., "description": ..., "parameters": {"type": "OBJECT", ...}}
"""

from adk_actors.schema.compiler import (
    MAX_SCHEMA_BYTES,
    CompiledSchema,
    JsonSchema,
    clear_schema_cache,
    compile_schema,
    normalize_schema,
    schema_cache_size,
    schema_digest,
)
from adk_actors.schema.gemini import (
    LEGACY_KEYWORDS,
    LEGACY_TYPES,
    gemini_function_declaration,
    gemini_parameters,
    legacy_schema,
)

__all__ = [
    "LEGACY_KEYWORDS",
    "LEGACY_TYPES",
    "MAX_SCHEMA_BYTES",
    "CompiledSchema",
    "JsonSchema",
    "clear_schema_cache",
    "compile_schema",
    "gemini_function_declaration",
    "gemini_parameters",
    "legacy_schema",
    "normalize_schema",
    "schema_cache_size",
    "schema_digest",
]
