"""Java behaviours the wire depends on."""

from __future__ import annotations

import pytest

from codec.javacompat import hash_order, hashmap_order, java_bool, java_int, long_hash, string_hash


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0), ("*", 42), ("TagA", 2598919), ("TagB", 2598920), ("polygenelubricants", -(2**31)), ("é", 233),
        ("😀", 55357 * 31 + 56832),  # two UTF-16 code units
    ],  # fmt: skip
)
def test_string_hash_is_javas(text: str, expected: int) -> None:
    assert string_hash(text) == expected


def test_hashmap_order_matches_the_java_pull_response_in_json_mode() -> None:
    # Golden frame B: a Java broker writes these four keys in this order in JSON mode.
    keys = ["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"]
    assert hashmap_order(keys) == ("suggestWhichBrokerId", "nextBeginOffset", "maxOffset", "minOffset")


def test_hash_order_keeps_insertion_order_within_a_bucket_and_resizes() -> None:
    # 0 and 16 share bucket 0 at capacity 16; after 13 entries the table is 32 wide.
    assert hash_order([16, 0, 1]) == [16, 0, 1]
    assert hash_order(list(range(13)) + [16]) == list(range(13)) + [16]
    assert hash_order([16] + list(range(13))) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16]


def test_long_hash_folds_high_and_low_words() -> None:
    assert long_hash(0) == 0
    assert long_hash(1 << 32) == 1
    assert long_hash(-1) == 0


def test_java_parsers() -> None:
    assert java_bool("TRUE") and not java_bool("yes")
    assert java_int("+7") == 7 and java_int("-2147483648") == -(2**31)
    for bad in ("", "1.0", "٣", "2147483648", " 1"):
        with pytest.raises(ValueError):
            java_int(bad)
