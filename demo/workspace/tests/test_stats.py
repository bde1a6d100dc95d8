from textkit import top_words, word_count


def test_word_count():
    assert word_count("one two  three") == 3


def test_top_words_ties_are_alphabetical():
    assert top_words("b a b a c", n=2) == [("a", 2), ("b", 2)]
