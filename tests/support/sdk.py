"""Answers of `memfs serve` read with the Python SDK's own types (PyPI
`anthropic`, 2.10 and later), so a field the SDK requires and the server
leaves out, or a value the SDK does not allow, fails the test that asked.

`strict=True` on the JSON: no coercion (a number for a string, a string for
a number), a missing required field or a value outside a `Literal` is a
`pydantic.ValidationError`. Fields the SDK does not know are allowed, as
they are in the SDK (`extra="allow"`).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import httpx
import pydantic

T = TypeVar("T", bound=pydantic.BaseModel)


def sdk_validate(model: type[T], answer: httpx.Response | dict[str, Any] | str) -> T:
    """`answer` (an HTTP answer, its JSON or its text) as the SDK's `model`."""
    if isinstance(answer, httpx.Response):
        assert answer.status_code == 200, answer.text
        text = answer.text
    elif isinstance(answer, str):
        text = answer
    else:
        text = json.dumps(answer)
    return model.model_validate_json(text, strict=True)


def sdk_validate_item(annotation: Any, item: dict[str, Any]) -> Any:
    """One item of a union the SDK names by an annotation (a session
    resource, a memory list item), validated strictly."""
    return pydantic.TypeAdapter(annotation).validate_json(json.dumps(item), strict=True)
