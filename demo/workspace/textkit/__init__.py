"""textkit: small text helpers."""

from textkit.slug import slugify
from textkit.stats import top_words, word_count

__all__ = ["slugify", "top_words", "word_count"]
