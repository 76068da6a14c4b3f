"""The reviewed list of equivalent mutants (``mutation/equivalent.toml``) names mutants of
the code as it is: each entry exactly one, by its line and column, with its reason.  An
entry that matched several mutants once marked unreviewed ones equivalent (a constant
``0`` to ``1`` anywhere in a function), and an entry whose line changed names none."""

from __future__ import annotations

from collections import Counter

from mutation.__main__ import equivalents, key
from mutation.runner import TARGETS, Module


def test_each_reviewed_equivalent_names_exactly_one_mutant_of_the_code() -> None:
    listed = equivalents()
    named = Counter(k for name in TARGETS for m in [Module.load(name)]
                    for e in m.mutants if (k := key(m, e)) in listed)
    assert {k: named[k] for k in listed if named[k] != 1} == {}


def test_no_mutant_is_listed_twice() -> None:
    """Two entries for one mutant would count it once while the list reads as two."""
    import tomllib

    from mutation.__main__ import EQUIVALENT

    entries = tomllib.loads(EQUIVALENT.read_text())["equivalent"]
    keys = Counter((e["module"], e["function"], e["operator"], e["original"], e["mutant"],
                    e["line"], e["column"]) for e in entries)
    assert [k for k, n in keys.items() if n > 1] == []
