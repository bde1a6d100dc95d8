"""Word statistics."""

import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def word_count(text: str) -> int:
    """Number of words in `text`."""
    return len(WORD.findall(text))


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The `n` most common words, lower-cased, most common first (ties: alphabetical)."""
    counts = Counter(word.lower() for word in WORD.findall(text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
