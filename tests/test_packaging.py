"""pyproject.toml in the forms setuptools accepts without warnings (checked by building a
wheel: `pip wheel --no-deps -w /tmp/w .` prints no warning)."""

import tomllib
from fnmatch import fnmatch
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def test_pyproject_uses_no_deprecated_form() -> None:
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    # a TOML table for the license is deprecated; an SPDX string needs setuptools >= 77
    assert isinstance(config["project"]["license"], str)
    assert config["build-system"]["requires"] == ["setuptools>=77"]


def test_package_data_exists() -> None:
    """Each package-data entry names a package that packages.find includes, and files
    that exist in it (grammar.lark moved with the parser once: the wheel lost it)."""
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    for package, patterns in config["tool"]["setuptools"]["package-data"].items():
        folder = HERE / package.replace(".", "/")
        assert (folder / "__init__.py").exists(), package
        assert any(fnmatch(package, pattern) for pattern in include), package
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}/{pattern}"


def test_every_package_is_installed() -> None:
    """Every folder with an ``__init__.py`` under an installed top-level package is
    installed too (an explicit list once left the sub-packages out)."""
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = [p for p in include if "*" not in p]
    for top in tops:
        for init in (HERE / top).rglob("__init__.py"):
            name = ".".join(init.parent.relative_to(HERE).parts)
            assert any(fnmatch(name, pattern) for pattern in include), name
