"""The ``%%sdql`` cell magic (``sdqlite.ui.magic``), driven through IPython's own testing
shell: inputs from the notebook's variables, ``-o`` back into one, gradients, the shown
programs, sparse results as tables, and errors as located messages without a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Code

from sdqlite.ui import api, magic

pytestmark = pytest.mark.usefixtures("quick_builds")  # (--backend cpp compiles)
DOT = "x : {dense_int -> real}\nsum(<i, a> in x) a * a"
MATVEC = ("A : {int -> {int -> real}}\nx : {dense_int -> real}\n"
          "sum(<i, r> in A) { i -> sum(<j, a> in r) a * x(j) }")


@pytest.fixture
def ip(ipython: InteractiveShell) -> Iterator[InteractiveShell]:
    shell = ipython
    shell.reset(new_session=False)
    shell.run_line_magic("load_ext", "sdqlite")
    yield shell
    shell.reset(new_session=False)


def cell(ip: InteractiveShell, line: str, body: str) -> Any:
    return ip.run_cell_magic("sdql", line, body)


def test_load_ext_registers_the_cell_magic(ip: InteractiveShell) -> None:
    assert "sdql" in ip.magics_manager.magics["cell"]


def test_inputs_come_from_the_notebook_and_the_value_is_numpy(ip: InteractiveShell) -> None:
    ip.user_ns["x"] = np.array([1.0, 2.0, 3.0])
    assert cell(ip, "", DOT) == pytest.approx(14.0)
    ip.user_ns["A"] = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]))
    got = cell(ip, "", MATVEC)
    np.testing.assert_allclose(got, ip.user_ns["A"] @ ip.user_ns["x"])


def test_output_goes_back_into_a_variable(ip: InteractiveShell) -> None:
    ip.user_ns["x"] = np.array([1.0, -2.0])
    cell(ip, "--grad x -o g", DOT)
    np.testing.assert_allclose(ip.user_ns["g"], 2 * ip.user_ns["x"])


def test_a_gradient_by_a_scipy_matrix_is_scipy_shown_as_a_table(ip: InteractiveShell) -> None:
    A = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]))
    ip.user_ns |= {"A": A, "x": np.array([1.0, 10.0, 100.0])}
    program = ("A : {int -> {int -> real}}\nx : {dense_int -> real}\n"
               "sum(<i, r> in A) sum(<j, a> in r) a * a * x(j)")
    shown = cell(ip, "--grad A -o gA", program)
    gA = ip.user_ns["gA"]
    assert isinstance(gA, sp.csr_matrix)
    want = A.multiply(2 * ip.user_ns["x"][np.newaxis, :])  # d(a² x_j)/da = 2 a x_j
    np.testing.assert_allclose(gA.toarray(), want.toarray())
    html = shown._repr_html_()
    coo = want.tocoo()
    for i, j, v in zip(coo.row, coo.col, coo.data, strict=True):
        assert f"<tr><td>{i}</td><td>{j}</td><td>{v}</td></tr>" in html
    assert f"{want.nnz} stored entries" in html


def test_a_value_result_shows_as_a_table_and_the_paper_notation(ip: InteractiveShell) -> None:
    ip.user_ns["V"] = {0: 1.5, 3: -2.0}
    shown = cell(ip, "-o W", "V : {int -> real}\nsum(<i, a> in V) { i -> a * a }")
    assert ip.user_ns["W"] == {0: 2.25, 3: 4.0}
    assert repr(shown) == "{ 0 -> 2.25, 3 -> 4.0 }"
    assert "<tr><td>3</td><td>4.0</td></tr>" in shown._repr_html_()
    empty = cell(ip, "", "V : {int -> real}\nV + (-1.0) * V")
    assert "no stored entries" in empty._repr_html_()


def test_large_tables_say_how_many_entries_they_leave_out(ip: InteractiveShell) -> None:
    ip.user_ns["V"] = {i: i + 1.0 for i in range(30)}
    shown = cell(ip, "", "V : {int -> real}\nsum(<i, a> in V) { i -> a }")
    html = shown._repr_html_()
    assert html.count("<tr><td>") == magic.ROWS
    assert f"… {30 - magic.ROWS} more entries" in html


def test_the_backends_agree(ip: InteractiveShell) -> None:
    ip.user_ns |= {"A": sp.random(6, 5, density=0.4, format="csr", random_state=1),
                   "x": np.linspace(-1.0, 1.0, 5)}
    cell(ip, "--grad x -o interp", MATVEC)
    cell(ip, "--grad x --backend cpp -o cpp", MATVEC)
    np.testing.assert_allclose(ip.user_ns["cpp"].toarray(), ip.user_ns["A"].toarray())
    np.testing.assert_allclose(ip.user_ns["interp"].toarray(), ip.user_ns["A"].toarray())


def test_programs_are_shown_highlighted_and_without_data_when_declared(
        ip: InteractiveShell) -> None:
    anf = cell(ip, "--anf -o text", "x : real\nx * sin(x * x)")
    assert isinstance(anf, Code) and ip.user_ns["text"] == anf.data
    assert anf.data.splitlines()[0] == "let t1 = x * x in"
    assert '<span class="k">let</span>' in anf._repr_html_()  # the sdql lexer's keyword
    fad = cell(ip, "--fad", "x : real\nx * sin(x * x)")
    assert "cos(t1) * t1'" in fad.data  # sin(a)' = cos(a) · a'
    opt = cell(ip, "--opt --grad V1", "V1 : {dense_int[n] -> real}\nV2 : {int[n] -> real}\n"
               "sum(<i, a> in V2) V1(i) * a")
    assert opt.data.splitlines()[-1] == "V2"  # the gradient of a dot product (§5.2)
    cpp = cell(ip, "--cpp", DOT)
    assert cpp.language == "cpp" and "#include" in cpp.data


def test_opt_composes_the_formats_it_is_given_and_cpp_those_of_the_data(
        ip: InteractiveShell) -> None:
    ip.user_ns |= {"A": sp.random(6, 5, density=0.4, format="csr", random_state=1),
                   "x": np.linspace(-1.0, 1.0, 5)}
    composed = cell(ip, "--opt --format A=csr", MATVEC).data
    assert "A_pos" in composed and "A_idx" in composed
    logical = cell(ip, "--opt", MATVEC).data  # declared inputs: their declared types
    assert "A_pos" not in logical
    assert "A_pos" in cell(ip, "--cpp", MATVEC).data  # the scipy matrix is read as CSR
    del ip.user_ns["A"]
    assert "A_pos" not in cell(ip, "--cpp", MATVEC).data  # as declared: a dictionary


def test_a_shown_program_reads_no_variable_of_a_declared_input(ip: InteractiveShell) -> None:
    ip.user_ns["x"] = 0.7  # left over from another cell: not a dense array
    text = cell(ip, "--anf", "x : {dense_int -> real}\nsum(<i, a> in x) a * a").data
    assert "sum(<i, a> in x)" in text
    ip.user_ns["y"] = np.array([1.0, 2.0])  # an undeclared input is typed by its variable
    assert "y" in cell(ip, "--fad", "sum(<i, a> in y) a * a").data
    assert "no notebook variable for input z" in render(ip, "--opt", "sum(<i, a> in z) a")[0]


def render(ip: InteractiveShell, line: str, body: str) -> list[str]:
    with pytest.raises(magic.CellError) as caught:
        cell(ip, line, body)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    return caught.value._render_traceback_()


def test_an_error_is_the_located_message_and_its_caret(ip: InteractiveShell) -> None:
    ip.user_ns["V"] = {0: 1.5}
    lines = render(ip, "", "V : {int -> real}\nV + 1.0")
    assert lines[0] == "<cell>:2:5: error: expected {int -> real}, found real"
    assert lines[1:] == ["  V + 1.0", "      ^^^"]
    assert render(ip, "", "V : {int -> real}\nV +")[0].startswith("<cell>:2:")


def test_missing_variables_and_inputs_are_named(ip: InteractiveShell) -> None:
    assert "no notebook variable for input y" in render(ip, "", "y : real\ny * y")[0]
    ip.user_ns["x"] = 2.0
    assert "--grad z: the program has no input z" in render(ip, "--grad z", "x : real\nx")[0]
    assert "choose one" in render(ip, "--opt --cpp", "x : real\nx")[0]
    assert "Python variable name" in render(ip, "-o 1x", "x : real\nx")[0]
    assert "Python variable name" in render(ip, "-o class", "x : real\nx")[0]
    assert "--opt --grad X" in render(ip, "--anf --grad x", "x : real\nx")[0]
    assert "computes nothing" in render(ip, "--opt --backend cpp", "x : real\nx")[0]
    assert "--format" in render(ip, "--format x=dense", "x : real\nx")[0]
    assert "no expression" in render(ip, "", "x : real")[0]


def test_an_internal_error_is_one_line(ip: InteractiveShell, monkeypatch: Any) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "value_of", broken)
    monkeypatch.delenv("SDQLITE_DEBUG", raising=False)
    ip.user_ns["x"] = 1.0
    [line] = render(ip, "", "x : real\nx")
    assert line.startswith("sdqlite: internal error: RuntimeError: boom")


def test_data_that_break_a_declaration_are_an_error_at_it(ip: InteractiveShell) -> None:
    ip.user_ns["V"] = {0: 1.5}
    lines = render(ip, "", "V : {dense_int -> real}\nsum(<i, a> in V) a")
    assert lines[0].startswith("<cell>:1:1: error: input V")
    assert lines[1] == "  V : {dense_int -> real}" and lines[2].startswith("  ^")


@pytest.mark.parametrize("line", ["--bogus", '-o "y', "--backend fortran"])
def test_a_bad_option_is_a_usage_error(ip: InteractiveShell, line: str) -> None:
    with pytest.raises(UsageError):
        cell(ip, line, "x")


def test_a_large_result_shows_its_first_entries_and_its_count(ip: InteractiveShell) -> None:
    big: Any = sp.random(300, 300, density=0.05, format="csr", random_state=4)
    ip.user_ns["B"] = big
    shown = cell(ip, "", "B : {int -> {int -> real}}\nsum(<i, r> in B) { i -> r }")
    text = repr(shown)
    assert text.splitlines()[0] == f"csr_matrix of shape (300, 300), {big.nnz} stored entries"
    assert len(text.splitlines()) == magic.ROWS + 2
    first = big.tocoo()
    first.sum_duplicates()  # (row-major order, as the table lists them)
    row, col = first.row[0], first.col[0]
    assert text.splitlines()[1] == f"  ({row}, {col}) -> {float(big[row, col])}"


def test_run_cell_prints_the_message_and_no_traceback(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["V"] = {0: 1.5}
    result = ip.run_cell("%%sdql\nV : {int -> real}\nV + 1.0")
    assert isinstance(result.error_in_exec, magic.CellError)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "<cell>:2:5: error: expected {int -> real}, found real" in shown
    assert "Traceback" not in shown and "File " not in shown
