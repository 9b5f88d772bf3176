"""Turning Spark job failures caused by bad input back into pyhudi errors."""

from __future__ import annotations

import re

from pyhudi.errors import HudiError, HudiKeyError
from pyhudi.spark.keygen import KEY_ERROR_MARKER


def translate(exc: BaseException) -> HudiError | None:
    """The pyhudi error a Spark exception stands for, when it carries one of our markers."""
    text = str(exc)
    if KEY_ERROR_MARKER in text:
        m = re.search(re.escape(KEY_ERROR_MARKER) + r"\s*([^\n]*)", text)
        detail = m.group(1).strip() if m else "invalid record key"
        detail = re.sub(r"\s*SQLSTATE: \w+$", "", detail)  # (Spark 4 appends the error's state to its line)
        return HudiKeyError(detail.rstrip(". "))
    return None
