"""The parser accepts every SDQLite listing of the paper as printed, and the printer
gives back a program that parses to the same AST."""

import re
from pathlib import Path

import pytest

from sdqlite.errors import ParseError
from sdqlite.syntax.parser import parse_expr
from sdqlite.syntax.printer import show

DATA = Path(__file__).parent / "data" / "paper_listings.sdql"
LATER: dict[int, str] = {}
NOT_SDQLITE = {26: "schematic: f(k,v) and g(k,v) are two-argument functions"}


def listings() -> dict[int, str]:
    parts = re.split(r"^//// listing (\d+)\n", DATA.read_text(encoding="utf-8"), flags=re.M)
    return {int(n): text for n, text in zip(parts[1::2], parts[2::2], strict=True)}


def test_all_listings_are_there() -> None:
    assert sorted(listings()) == list(range(27))


@pytest.mark.parametrize("n", [n for n in range(27) if n not in LATER | NOT_SDQLITE])
def test_listing_parses_and_round_trips(n: int) -> None:
    e = parse_expr(listings()[n])
    assert parse_expr(show(e)) == e


@pytest.mark.parametrize("n", sorted(NOT_SDQLITE))
def test_schematic_listing_is_rejected_with_a_location(n: int) -> None:
    with pytest.raises(ParseError) as err:
        parse_expr(listings()[n])
    assert err.value.span is not None
