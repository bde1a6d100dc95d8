def first_words(text: str, count: int) -> str:
    """The first `count` words of `text`, separated by single spaces."""
    return " ".join(text.split()[:count])
