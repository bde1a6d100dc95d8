from blurb.words import first_words


def test_first_words_keeps_the_first_words():
    assert first_words("one two  three four", 3) == "one two three"


def test_first_words_of_a_short_text_is_the_whole_text():
    assert first_words("one", 3) == "one"
