"""Pictures as a library feature: ``sdqlite.spy`` (the stored entries of a value, a numpy
array or a scipy matrix), ``sdqlite.loop_nest`` (the program after destination-passing
style) and the ``sdql`` Pygments lexer."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import scipy.sparse as sp
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Keyword

import sdqlite
from sdqlite.errors import DataError
from sdqlite.ui.highlight import CONSTANTS, KEYWORDS, TYPES, SDQLiteLexer

matplotlib.use("Agg")
import matplotlib.pyplot as plt

pytestmark = pytest.mark.usefixtures("quick_builds")
EXAMPLES = Path(__file__).resolve().parent.parent / "paper_examples"


def drawn(ax: object) -> set[tuple[int, int]]:
    """The (row, column) of every marker ``spy`` drew."""
    [line] = ax.lines  # type: ignore[attr-defined]
    cols, rows = line.get_data()
    return {(int(r), int(c)) for r, c in zip(rows, cols, strict=True)}


def test_spy_draws_the_stored_entries_of_each_kind() -> None:
    dense = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    stored = {(0, 0), (0, 2), (2, 1)}
    value = {0: {0: 1.0, 2: 2.0}, 2: {1: 3.0}}
    for data in (dense, sp.csr_matrix(dense), sp.csc_array(dense), value):
        ax = sdqlite.spy(data)
        assert drawn(ax) == stored, type(data)
        assert ax.get_title() == "3 × 3, 3 stored"
        plt.close("all")


def test_spy_draws_a_vector_as_one_row_and_keeps_a_given_shape() -> None:
    assert drawn(sdqlite.spy({1: 2.0, 4: -1.0})) == {(0, 1), (0, 4)}
    assert drawn(sdqlite.spy(np.array([0.0, 5.0, 0.0]))) == {(0, 1)}
    ax = sdqlite.spy({0: {3: 1.0}}, shape=(5, 6), title="M")
    assert ax.get_title() == "M" and ax.get_xlim() == pytest.approx((-0.5, 5.5))
    empty = sdqlite.spy({}, shape=(2, 3))
    assert not empty.lines and empty.get_title() == "2 × 3, 0 stored"
    plt.close("all")


@pytest.mark.parametrize(("data", "says"), [
    (np.zeros((2, 2, 2)), "3 dimensions"),
    ({0: {1: {2: 1.0}}}, "more than two layers"),
    ({-1: 1.0}, "from 0 up"),
    ({0.5: 1.0}, "integer keys"),
    ({0: 1.0, 1: {2: 3.0}}, "mixes numbers and dictionaries"),
    ("A", "not str"),
])
def test_spy_says_what_it_cannot_draw(data: object, says: str) -> None:
    with pytest.raises(DataError, match=says):
        sdqlite.spy(data)


@pytest.mark.parametrize("shape", [(3,), (0, 2), (2.0, 2), "3x3"])
def test_spy_says_what_a_shape_is(shape: object) -> None:
    with pytest.raises(DataError, match="two positive integers"):
        sdqlite.spy({0: 1.0}, shape=shape)  # type: ignore[arg-type]


def test_spy_draws_each_stored_entry_once_zeros_included() -> None:
    m = sp.coo_matrix((np.array([1.0, 2.0, 0.0]), (np.array([0, 0, 1]), np.array([1, 1, 2]))),
                      shape=(2, 3))
    ax = sdqlite.spy(m)  # (0, 1) stored twice, (1, 2) stores a zero: scipy keeps both
    assert drawn(ax) == {(0, 1), (1, 2)} and ax.get_title() == "2 × 3, 2 stored"
    plt.close("all")


def test_spy_refuses_a_shape_smaller_than_the_value() -> None:
    with pytest.raises(DataError, match="smaller"):
        sdqlite.spy(sp.eye(4), shape=(2, 2))


def test_spy_without_matplotlib_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(DataError, match=r"sdqlite\[plot\]"):
        sdqlite.spy({0: 1.0})


def test_the_loop_nest_is_the_paper_dps() -> None:
    """§5.5: a singleton inside a sum becomes ``result[k] += v`` (DPS); without DPS each
    sum adds a dictionary it built (the red listing)."""
    square = "V : {int -> real}\nsum(<i, a> in V) { i -> a * a }"
    for dps, body in ((True, "  result[{k}] += {v} * {v}"),
                      (False, "  result += {{ {k} -> {v} * {v} }}")):
        nest = sdqlite.loop_nest(square, {0: 1.0, 2: 3.0}, dps=dps).splitlines()
        assert nest[:2] == ["V : {int -> real}", "result : {int -> real}  (the destination)"]
        k, v = nest[2].removeprefix("for <").removesuffix("> in V:").split(", ")
        assert nest[3:] == [body.format(k=k, v=v), "prune result"]


def test_the_loop_nest_reads_the_formats_of_the_data() -> None:
    matvec = ("A : {int -> {int -> real}}\nx : {dense_int -> real}\n"
              "sum(<i, r> in A) { i -> sum(<j, a> in r) a * x(j) }")
    A, x = sp.random(5, 4, density=0.5, format="csr", random_state=2), np.ones(4)
    nest = sdqlite.loop_nest(matvec, A, x)
    assert "A_pos : {dense_int -> int}" in nest and "A_idx(A_pos(" in nest
    assert "A_pos" not in sdqlite.loop_nest(matvec, A={0: {1: 1.0}}, x=x)  # a dictionary


def test_loop_nest_s_options_are_not_inputs() -> None:
    program = "dps : {int -> real}\nsum(<i, a> in dps) { i -> sin(a) }"
    with pytest.raises(DataError, match="by position"):
        sdqlite.loop_nest(program, dps={0: 1.0})  # type: ignore[arg-type]
    assert " in dps:" in sdqlite.loop_nest(program, {0: 1.0})


def test_an_input_called_result_keeps_its_name_and_the_destination_is_marked() -> None:
    nest = sdqlite.loop_nest("result : {int -> real}\n"
                             "sum(<i, a> in result) { i -> sin(a) }", {1: 2.0}).splitlines()
    assert nest[1] == "%result : {int -> real}  (the destination)"
    assert nest[2].endswith(" in result:") and nest[3].startswith("  %result[")


def test_the_lexer_reads_every_paper_example_without_an_error() -> None:
    lexer = SDQLiteLexer()
    for path in sorted(EXAMPLES.glob("*.sdql")):
        tokens = list(lexer.get_tokens(path.read_text()))
        assert not [t for t in tokens if t[0] is Error], path.name
        words = {v for t, v in tokens if str(t).startswith(str(Keyword))}
        assert words <= {*KEYWORDS, *CONSTANTS, *TYPES}, path.name
        assert ("sum" in {v for t, v in tokens if t is Keyword}) == ("sum" in path.read_text())


def test_pygments_finds_the_lexer_by_name_and_by_file() -> None:
    assert isinstance(get_lexer_by_name("sdql"), SDQLiteLexer)
    assert isinstance(get_lexer_for_filename("batax.sdql"), SDQLiteLexer)
