"""pyproject.toml in the forms setuptools accepts without warnings (checked by building a
wheel: `pip wheel --no-deps -w /tmp/w .` prints no warning)."""

import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def test_pyproject_uses_no_deprecated_form() -> None:
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    # a TOML table for the license is deprecated; an SPDX string needs setuptools >= 77
    assert isinstance(config["project"]["license"], str)
    assert config["build-system"]["requires"] == ["setuptools>=77"]


def test_package_data_exists() -> None:
    config = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))
    for package, patterns in config["tool"]["setuptools"]["package-data"].items():
        assert package in config["tool"]["setuptools"]["packages"]
        for pattern in patterns:
            assert list((HERE / package).glob(pattern)), f"{package}/{pattern}"
