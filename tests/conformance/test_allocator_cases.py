"""Every allocator conformance case, for each Kubernetes version it holds for, with exactly its gates."""

from __future__ import annotations

import pytest

from tests.conformance.corpus import (
    OWN_DIR,
    SHARED_DIR,
    SHARED_DIR_FROM_ENV,
    SHARED_MIN_CASES,
    Case,
    discover,
    mismatches,
    run_case,
    shared_corpus_status,
)

# Cases whose outcome draq does not reproduce, with the reason (kept visible, never silently skipped).
KNOWN_DIFFERENCES: dict[str, str] = {}
CASES = discover(SHARED_DIR, OWN_DIR)


def test_shared_corpus_is_complete() -> None:
    """The shared corpus, when there, is a whole copy; a plain clone without it skips (saying so)."""
    if not SHARED_DIR.is_dir():
        if SHARED_DIR_FROM_ENV:
            pytest.fail(f"DRAQ_CONFORMANCE_DIR points to {SHARED_DIR}, which is not a directory")
        pytest.skip(shared_corpus_status())
    shared = {c.name for c in CASES if c.path.parent == SHARED_DIR}
    assert len(shared) >= SHARED_MIN_CASES, (
        f"only {len(shared)} allocator cases (directories with an expect.yaml) under {SHARED_DIR}, "
        f"expected at least {SHARED_MIN_CASES}: a partial or broken copy of the shared corpus")


def test_own_cases_are_present() -> None:
    own = {c.name for c in CASES if c.path.parent == OWN_DIR}
    assert own, f"no allocator cases (directories with an expect.yaml) under {OWN_DIR}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    if case.id in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[case.id])
    expect, outcome, _ = run_case(case)
    problems = mismatches(expect, outcome)
    assert not problems, "\n".join(problems)
