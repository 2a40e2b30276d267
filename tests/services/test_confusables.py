"""Unicode's confusable skeleton (UTS #39 section 4) from Unicode's own data, without ICU."""

from bot.services.confusables import in_scripts, skeleton, unicode_version


def test_the_data_is_unicodes_confusables_file() -> None:
    assert unicode_version() == "15.1.0"


def test_look_alikes_share_a_skeleton_and_others_do_not() -> None:
    assert skeleton("p\u0430ypal") == skeleton("paypal")  # Cyrillic a
    assert skeleton("rn") == skeleton("m")  # a prototype of two characters
    math_letters = "\U0001d52d\U0001d4b6y\U0001d561\U0001d552\u2113"  # 𝔭𝒶y𝕡𝕒ℓ
    assert skeleton(math_letters) == skeleton("paypal")
    assert skeleton("I") == skeleton("l") != skeleton("i")  # case is the caller's to fold
    assert skeleton("cat") != skeleton("cot")


def test_a_skeleton_is_its_own_skeleton() -> None:
    for text in ("paypal", "\u0412\u0410D", "ｂａｄ", "暴力", "ki11", "ﬁle"):
        assert skeleton(skeleton(text)) == skeleton(text)


def test_characters_that_show_nothing_are_left_out() -> None:
    assert skeleton("b\ufe0fa\u3164d\u034f") == skeleton("bad")


def test_scripts_are_unicodes_script_property() -> None:
    han_thai = frozenset({"Hani", "Thai"})
    assert in_scripts("暴", han_thai) and in_scripts("ส", han_thai)
    assert not in_scripts("a", han_thai)
    assert not in_scripts("ー", frozenset({"Hira", "Kana"}))  # the prolonged sound mark: Common
