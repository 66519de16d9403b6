"""Numbers spelled out the way LibriSpeech transcribes them ("THREE HUNDRED AND TWELVE"), for the
embedded corpus (datagen/corpus.py)."""

_ONES = ("ZERO ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN "
         "FOURTEEN FIFTEEN SIXTEEN SEVENTEEN EIGHTEEN NINETEEN").split()
_TENS = "_ _ TWENTY THIRTY FORTY FIFTY SIXTY SEVENTY EIGHTY NINETY".split()
ORDINALS = ("FIRST SECOND THIRD FOURTH FIFTH SIXTH SEVENTH EIGHTH NINTH TENTH ELEVENTH "
            "TWELFTH").split()


def number_words(n: int) -> str:
    """Spell a whole number 0 <= n < 1_000_000 in words, British style ('ONE HUNDRED AND TEN')."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number_words expects 0 <= n < 1000000, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " HUNDRED" + ("" if rest == 0 else " AND " + number_words(rest))
    thousands, rest = divmod(n, 1000)
    head = number_words(thousands) + " THOUSAND"
    if rest == 0:
        return head
    return head + (" AND " if rest < 100 else " ") + number_words(rest)


def year_words(year: int) -> str:
    """Spell a year 1100..1999 as read aloud: 1842 -> 'EIGHTEEN FORTY TWO', 1800 -> 'EIGHTEEN HUNDRED'."""
    century, rest = divmod(year, 100)
    if rest == 0:
        return number_words(century) + " HUNDRED"
    if rest < 10:
        return number_words(century) + " O " + number_words(rest)
    return number_words(century) + " " + number_words(rest)
