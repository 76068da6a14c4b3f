"""The command line: values on stdout, located diagnostics on stderr, no tracebacks."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from sdqlite.ui.cli import main

DOT = "V1 : {int -> real}\nV2 : {int -> real}\nsum(<i, a> in V1) a * V2(i)\n"


def _file(tmp_path: Path, text: str, name: str = "prog.sdql") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_eval_literal_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, DOT)
    assert main(["eval", f, "-i", "V1={0 -> 1.5, 2 -> 3.0}", "-i", "V2={2 -> 2.0}"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(3.0 * 2.0)


def test_eval_empty_literal_takes_the_declared_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, DOT)
    assert main(["eval", f, "-i", "V1={0 -> 1.5}", "-i", "V2={}"]) == 0
    assert capsys.readouterr().out.strip() == "0.0"


def test_eval_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]]))
    scipy.io.mmwrite(tmp_path / "M.mtx", m)
    v = np.array([0.5, -1.0])
    np.save(tmp_path / "v.npy", v)
    f = _file(tmp_path, "sum(<i,r> in M) { i -> sum(<j,a> in r) a * v(j) }\n")
    assert main(["eval", f, "-i", f"M={tmp_path / 'M.mtx'}", "-i", f"v={tmp_path / 'v.npy'}",
                 "--type"]) == 0
    out = capsys.readouterr()
    expected = m @ v  # independent: scipy's product
    x0, x1, x2 = expected.tolist()
    assert out.out.strip() == f"{{ 0 -> {x0!r}, 1 -> {x1!r}, 2 -> {x2!r} }}"
    assert out.err.strip() == ": {int -> real}"


def test_eval_from_stdin(monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("{1 -> 2.0} * 3.0\n"))
    assert main(["eval", "-"]) == 0
    assert capsys.readouterr().out.strip() == "{ 1 -> 6.0 }"


def test_type_error_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, "x : real\n\nsum(<i,a> in x) a\n")
    assert main(["check", f]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"{f}:3:14: error: expected a dictionary or dense array for the domain of sum, "
        "found real")
    assert err.splitlines()[1:] == ["  sum(<i,a> in x) a", "               ^"]


def test_parse_error_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, "let x = 1 in\n  x +* 2\n")
    assert main(["check", f]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:2:6: error: unexpected '*'")
    assert "Traceback" not in err


def test_domain_error_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, "1.0 + log(-1.0)\n")
    assert main(["eval", f]) == 1
    assert "1:7: error: log(-1.0) is outside the domain of log" in capsys.readouterr().err


def test_data_must_match_declaration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "m.npy", np.eye(2))
    f = _file(tmp_path, DOT)
    assert main(["eval", f, "-i", f"V1={tmp_path / 'm.npy'}", "-i", "V2={}"]) == 1
    err = capsys.readouterr().err
    assert ("input V1 is declared {int -> real} but its data is "
            "{dense_int -> {dense_int -> real}}") in err


def test_undeclared_input_takes_type_of_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "v.npy", np.array([1.0, 0.0, 2.0]))
    f = _file(tmp_path, "sum(<i,a> in v) a\n")
    assert main(["check", f, "-i", f"v={tmp_path / 'v.npy'}"]) == 0
    assert capsys.readouterr().out.strip() == f"{f}: real"


@pytest.mark.parametrize("args", [
    ["eval", "missing.sdql"],
    ["eval", "PROG", "-i", "V1=nope.npy"],
    ["eval", "PROG", "-i", "V1"],
    ["eval", "PROG", "-i", "V1={0 -> }"],
])
def test_bad_invocations_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str]) -> None:
    f = _file(tmp_path, DOT)
    assert main([f if a == "PROG" else a for a in args]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str],
                                                 flag: str) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as stop:
        main([flag])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"sdqlite {metadata.version('sdqlite')}\n"


@pytest.mark.parametrize(("text", "words"), [
    ("", "nothing to check: the program is empty"),
    ("// a comment\n", "nothing to check: the program is empty"),
    ("x : real\n", "nothing to check: the program has declarations"),
])
def test_checking_no_expression_says_there_is_nothing_to_check(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str,
        words: str) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["check", "-"]) == 1
    assert words in capsys.readouterr().err


def test_repl_help_lists_the_repl_commands(capsys: pytest.CaptureFixture[str]) -> None:
    from sdqlite.ui.session import HELP

    with pytest.raises(SystemExit):
        main(["repl", "--help"])
    assert HELP in capsys.readouterr().out  # one source for both


def test_examples_help_lists_every_example(capsys: pytest.CaptureFixture[str]) -> None:
    from paper_examples.__main__ import catalog

    with pytest.raises(SystemExit):
        main(["examples", "--help"])
    lines = capsys.readouterr().out.splitlines()
    names = [name for _, items in catalog() for name, _ in items]
    assert names
    for name in names:
        assert any(line.split()[:1] == [name] for line in lines), name


def test_examples_run_by_name_and_reject_unknown_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples", "trace"]) == 0
    assert capsys.readouterr().out.endswith(
        "1 of 1 paper examples agree with their numpy/scipy expectations\n")
    assert main(["examples", "trace", "nope"]) == 2
    out = capsys.readouterr()
    assert out.err == ("sdqlite examples: error: unknown example nope "
                       "(`sdqlite examples --help` lists them)\n")
    assert out.out == ""


SMV = ("A : {int -> {int -> real}}\nx : {dense_int -> real}\n"
       "sum(<i, r> in A) {i -> sum(<j, a> in r) a * x(j)}\n")


def _read(path: Path) -> np.ndarray:
    """A written file as a dense array, read by numpy and scipy themselves."""
    match path.suffix:
        case ".npy":
            return np.asarray(np.load(path))
        case ".npz":
            return np.asarray(sp.load_npz(path).toarray())
    m = scipy.io.mmread(path)
    return np.asarray(m.toarray() if sp.issparse(m) else m)


@pytest.mark.parametrize("backend", ["interp", "cpp"])
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".mtx"])
def test_output_writes_the_result_as_numpy_and_scipy_read_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, backend: str) -> None:
    """``--output`` writes A x (eval) and the Jacobian A (grad by x): scipy's own product
    and A itself are the independent expectations; nothing goes to stdout."""
    a = sp.csr_array(sp.random(5, 4, density=0.4, random_state=3))
    x = np.arange(1.0, 5.0)
    sp.save_npz(tmp_path / "A.npz", a)
    np.save(tmp_path / "x.npy", x)
    f = _file(tmp_path, SMV)
    data = ["-i", f"A={tmp_path / 'A.npz'}", "-i", f"x={tmp_path / 'x.npy'}",
            "--backend", backend]
    out = tmp_path / f"y{suffix}"
    assert main(["eval", f, *data, "-o", str(out)]) == 0
    np.testing.assert_allclose(_read(out).reshape(-1), a.toarray() @ x, rtol=1e-12)
    jac = tmp_path / f"j{suffix}"
    assert main(["grad", f, "--wrt", "x", *data, "--output", str(jac)]) == 0
    np.testing.assert_allclose(_read(jac), a.toarray(), rtol=1e-12)
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == [f"wrote {out}: ndarray of shape (5,)",
                                        f"wrote {jac}: csr_array of shape (5, 4), "
                                        f"{a.nnz} entries stored"]


def test_output_compiles_with_the_options_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--output`` with ``--backend cpp`` compiles as the command without it does:
    ``--format``, ``--no-opt``, ``--no-normalize``, ``--no-dps`` and the file's name."""
    import codegen.api
    import sdqlite.ui.api as facade

    seen: list[dict[str, object]] = []
    real = codegen.api.compile

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append({"formats": args[2], **kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(facade, "compile_", recorded)
    facade._compiled_text.cache_clear()
    a = sp.csr_array(sp.random(5, 4, density=0.4, random_state=3))
    sp.save_npz(tmp_path / "A.npz", a)
    np.save(tmp_path / "x.npy", np.arange(1.0, 5.0))
    f = _file(tmp_path, SMV)
    out = tmp_path / "j.npz"
    assert main(["grad", f, "--wrt", "x", "-i", f"A={tmp_path / 'A.npz'}", "-i",
                 f"x={tmp_path / 'x.npy'}", "--backend", "cpp", "--format", "A=coo",
                 "--no-opt", "--no-dps", "-o", str(out)]) == 0
    np.testing.assert_allclose(_read(out), a.toarray(), rtol=1e-12)
    (options,) = seen
    assert options["formats"] == {"A": "coo"} and options["optimize"] is False
    assert options["dps"] is False and options["normalize"] is True
    assert options["name"] == f"{Path(f).stem}_wrt_x"


@pytest.mark.parametrize(("program", "name", "message"), [
    ("2.0 * 3.0", "r.mtx", "a .mtx file holds a vector or a matrix; the result is a number"),
    ("2.0 * 3.0", "r.npz", "a .npz file holds a vector or a matrix; the result is a number"),
    ("1 = 1", "r.npy", "the result is not a number, vector or matrix"),
    ("{0 -> {1 -> {2 -> 1.0}}}", "r.npy", "the result is not a number, vector or matrix"),
    ("2.0", "r.txt", "unknown file type '.txt'"),
    ("2.0", "missing/r.npy", "cannot write: No such file or directory"),
])
def test_output_refuses_what_the_file_cannot_hold_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], program: str, name: str,
        message: str) -> None:
    f = _file(tmp_path, program + "\n")
    before = set(tmp_path.iterdir())
    assert main(["eval", f, "-o", str(tmp_path / name)]) == 1
    assert message in capsys.readouterr().err
    assert set(tmp_path.iterdir()) == before  # no file, no temporary left behind


def test_output_keeps_the_old_file_when_writing_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The file is replaced whole or not at all: a write that fails half-way leaves it."""
    target = tmp_path / "r.npy"
    np.save(target, np.array([7.0]))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", broken)
    assert main(["eval", _file(tmp_path, "2.0\n"), "-o", str(target)]) == 1
    assert "cannot write: No space left on device" in capsys.readouterr().err
    monkeypatch.undo()
    assert np.load(target).tolist() == [7.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.sdql", "r.npy"]


@pytest.mark.parametrize("command", [["eval"], ["eval", "--backend", "cpp"], ["check"]])
def test_an_input_given_twice_is_an_error_not_the_last_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    """``-i X=a.npy -i X=b.npy`` silently kept b.npy: now it exits 1 naming the input (the
    name as written, spaces around it or not), and the same data given once is read."""
    np.save(tmp_path / "a.npy", np.array([1.0, 2.0]))
    np.save(tmp_path / "b.npy", np.array([5.0, 7.0]))
    f = _file(tmp_path, "X : {dense_int -> real}\nsum(<i, a> in X) a\n")
    a, b = f"{tmp_path / 'a.npy'}", f"{tmp_path / 'b.npy'}"
    for twice in (["-i", f"X={a}", "-i", f"X={b}"], ["-i", f"X={a}", "-i", f" X = {a}"]):
        assert main([command[0], f, *command[1:], *twice]) == 1
        out = capsys.readouterr()
        assert out.err == "sdqlite: error: --input X is given twice\n" and out.out == ""
    assert main([command[0], f, *command[1:], "-i", f"X={b}"]) == 0
    assert capsys.readouterr().out == (f"{f}: real\n" if command[0] == "check" else
                                       f"{5.0 + 7.0}\n")


def test_output_is_written_with_the_usual_permissions(tmp_path: Path) -> None:
    """Written through a private temporary file, the result still gets 0666 less the
    umask, as a file the shell makes (not mkstemp's 0600)."""
    import os

    old = os.umask(0o022)
    try:
        assert main(["eval", _file(tmp_path, "2.0\n"), "-o", str(tmp_path / "r.npy")]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "r.npy").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("command", [["eval"], ["eval", "--backend", "cpp"], ["check"]])
def test_an_input_the_program_does_not_have_is_an_error_not_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    """Issue 27, bug 3: ``-i Q=1.0`` for a program without Q was silently ignored."""
    f = _file(tmp_path, "x : real\nx * 2.0\n")
    assert main([command[0], f, *command[1:], "-i", "x=1.0", "-i", "Q=1.0"]) == 1
    out = capsys.readouterr()
    assert out.err == "sdqlite: error: --input Q: the program has no input Q (inputs: x)\n"
    assert out.out == ""
