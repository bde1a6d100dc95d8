"""URL slugs."""

import re
import unicodedata


def slugify(text: str, separator: str = "-") -> str:
    """Lower-case ASCII slug of `text`: 'Hello, World!' -> 'hello-world'."""
    normalized = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.sub(r"[^a-zA-Z0-9]", separator, normalized.lower())
    return words.strip(separator)
