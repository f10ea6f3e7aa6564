"""Every allocator conformance case, for each Kubernetes version it holds for, with exactly its gates."""

from __future__ import annotations

import pytest

from tests.conformance.corpus import OWN_DIR, SHARED_DIR, Case, discover, mismatches, run_case

CASES = discover(SHARED_DIR, OWN_DIR)


def test_corpus_is_present() -> None:
    shared = {c.name for c in CASES if c.path.parent == SHARED_DIR}
    assert len(shared) >= 90, f"allocator cases not found under {SHARED_DIR}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    expect, outcome, _ = run_case(case)
    problems = mismatches(expect, outcome)
    assert not problems, "\n".join(problems)
