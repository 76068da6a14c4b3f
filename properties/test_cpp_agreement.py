"""The C++ backend agrees with the oracle (the fourth property: §6 code generation).

For generated well-typed programs Γ ⊢ e : T of Physical SDQLite — every construct,
gradients included — and inputs ρ ∈ ⟦Γ⟧, the compiled program (lowered with and without
destination-passing style, emitted, built, run on ρ's buffers) computes the
interpreter's ⟦e⟧(ρ), which the properties of ``test_fad_correct.py`` check against the
sympy oracle; or, where the interpreter reports an evaluation error, so does the
compiled code.  Reals compare to 1e-9 (the C++ sums a hash map's entries in another
order); dense arrays stored inside dictionaries compare pointwise
(``semantics.values.inner_extents_forgotten``).

Programs are compiled ``BATCH`` to a translation unit, at ``-O0`` unless
``SDQLITE_CXXFLAGS`` says otherwise (the sanitizer run sets it), so the ``ci`` profile's
300 examples are 300 programs in 300 / BATCH compilations.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.build import build
from codegen.data import decode, encode
from codegen.dps import lower
from codegen.emit import Kernel, emit_kernel, translation_unit
from codegen.native import Native
from properties.generators import Generated, programs_with_env
from sdqlite.errors import EvalError
from sdqlite.typecheck import typecheck
from semantics.interp import evaluate
from semantics.values import Value, inner_extents_forgotten, values_equal

BATCH = 20
EXAMPLES = max(2, settings().max_examples // BATCH)


@pytest.fixture(scope="module", autouse=True)
def quick_builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Unoptimized builds in a private cache (unless the flags are given)."""
    saved = {k: os.environ.get(k) for k in ("SDQLITE_CXXFLAGS", "SDQLITE_CACHE")}
    os.environ.setdefault("SDQLITE_CXXFLAGS", "-O0")
    os.environ["SDQLITE_CACHE"] = str(tmp_path_factory.mktemp("cpp-cache"))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@dataclass
class Case:
    program: Generated
    env: dict[str, Value]
    dps: bool


cases = st.builds(lambda pe, dps: Case(pe[0], pe[1], dps), programs_with_env(), st.booleans())


def agree(got: Value, want: Value) -> bool:
    return values_equal(inner_extents_forgotten(got), inner_extents_forgotten(want),
                        rel_tol=1e-9, abs_tol=1e-12)


def check_batch(batch: list[Case]) -> None:
    kernels: list[Kernel] = []
    for i, c in enumerate(batch):
        elab, t = typecheck(c.program.expr, c.program.ctx)
        kernels.append(emit_kernel(f"k{i}", lower(elab, c.program.ctx, t, dps=c.dps)))
    built = build(translation_unit(kernels))
    for c, k in zip(batch, kernels, strict=True):
        elab, _ = typecheck(c.program.expr, c.program.ctx)
        run = Native(built, k)
        inputs = [encode(c.env[x], t) for x, t in k.inputs]
        try:
            want = evaluate(elab, c.env)
        except EvalError as err:
            with pytest.raises(EvalError) as got_err:
                run(inputs)
            assert got_err.value.message == err.message or "overflow" in err.message
            continue
        got = decode(run(inputs), k.result)
        assert agree(got, want), (Path(built.source), k.name, got, want)


@settings(max_examples=EXAMPLES)
@given(st.lists(cases, min_size=BATCH, max_size=BATCH))
def test_compiled_programs_agree_with_the_interpreter(batch: list[Case]) -> None:
    check_batch(batch)
