"""What the modules of annotate_trace share: its name in errors, the category of its slices."""

from __future__ import annotations

from ..._errors import make_error

WHAT = "annotate_trace"
CATEGORY = "gpu_user_annotation"


def error(cls: type, message: str) -> Exception:
    return make_error(cls, f"{WHAT}: {message}")


def cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

