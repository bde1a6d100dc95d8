"""textkit: small text helpers."""

from textkit.slug import slugify
from textkit.stats import word_count, top_words

__all__ = ["slugify", "top_words", "word_count"]
