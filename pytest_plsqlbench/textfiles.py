"""Text files users hand us (data sources, results files): plain or gzipped, BOM or not."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path


def read_text(path: Path) -> str:
    """The file's UTF-8 text, gunzipped first when it is gzip (evalplus publishes
    ``MbppPlus.jsonl.gz``; results files are often kept gzipped), a byte order mark dropped.

    Raises :class:`OSError` (also for a damaged gzip stream) or :class:`UnicodeDecodeError`.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, zlib.error) as exc:
            raise OSError(f"damaged gzip data: {exc}") from exc
    return raw.decode("utf-8-sig")
