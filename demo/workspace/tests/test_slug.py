from textkit import slugify


def test_simple_sentence():
    assert slugify("Hello World") == "hello-world"


def test_accents_are_folded():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_runs_of_separators_collapse():
    assert slugify("Hello,   World!") == "hello-world"
