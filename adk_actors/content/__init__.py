"""The versioned, JSON-safe content model: text, inline data, file references, function calls and responses.

::

    from adk_actors import content

    prompt = content.new([content.text("Describe this image."), content.inline_data("image/png", png_bytes)])
    wire = prompt.to_dict()            # {"schema_version": 1, "parts": [...]}
    assert content.validate(wire) == prompt
"""

from adk_actors.content.canonical import (
    MAX_ENVELOPE_DEPTH,
    MAX_JSON_NODES,
    canonical_dumps,
    canonical_loads,
    check_json_safe,
)
from adk_actors.content.json_values import MAX_JSON_DEPTH, copy_json, utf8_size
from adk_actors.content.limits import CEILINGS, DEFAULT_LIMITS, ContentLimits
from adk_actors.content.model import CONTENT_SCHEMA_VERSION, Content, as_content, new, validate
from adk_actors.content.parts import (
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    canonical_base64,
    check_function_name,
    check_mime_type,
    check_uri,
    file_data,
    function_call,
    function_response,
    inline_data,
    part_from_dict,
    text,
)

__all__ = [
    "CEILINGS",
    "CONTENT_SCHEMA_VERSION",
    "DEFAULT_LIMITS",
    "MAX_ENVELOPE_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "Content",
    "ContentLimits",
    "FileDataPart",
    "FunctionCallPart",
    "FunctionResponsePart",
    "InlineDataPart",
    "Part",
    "TextPart",
    "as_content",
    "canonical_base64",
    "canonical_dumps",
    "canonical_loads",
    "check_function_name",
    "check_json_safe",
    "check_mime_type",
    "check_uri",
    "copy_json",
    "file_data",
    "function_call",
    "function_response",
    "inline_data",
    "new",
    "part_from_dict",
    "text",
    "utf8_size",
    "validate",
]
