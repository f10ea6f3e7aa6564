"""Settings for every test session: Hypothesis profiles, the seeds of randomized tests, the corpus used.

Property tests (Hypothesis) run derandomized when the environment variable CI is set (CI services set
it to "true"): every run tries the same examples, derived from each test itself. Elsewhere they run
with a random seed, printed in the report header; `--hypothesis-seed=N` runs them again with seed N.
`HYPOTHESIS_PROFILE=ci|dev` or `--hypothesis-profile` picks a profile explicitly.

The scheduler comparisons (e2e) generate their scenarios from a fixed seed (DRAQ_DIFF_SEED picks
another), and the header says whether the shared allocator corpus was found.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, settings

from tests.support.environment import in_ci

# Both start from Hypothesis' own defaults, not from whatever profile is loaded (Hypothesis loads its
# built-in "ci" profile by itself when it sees CI; "ci" here is that profile, spelled out).
CI_PROFILE, DEV_PROFILE = "ci", "dev"
settings.register_profile(CI_PROFILE, settings.get_profile("default"), derandomize=True, database=None,
                          print_blob=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(DEV_PROFILE, settings.get_profile("default"), print_blob=True)


settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or (CI_PROFILE if in_ci() else DEV_PROFILE))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Outside CI, choose the session's Hypothesis seed here, so that the header can print it.

    Runs before Hypothesis' own plugin, which applies `--hypothesis-seed` to every property test.
    """
    profile = config.getoption("--hypothesis-profile") or settings.get_current_profile_name()
    if not settings.get_profile(profile).derandomize and config.getoption("--hypothesis-seed") is None:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def hypothesis_line(config: pytest.Config) -> str:
    profile = settings.get_current_profile_name()
    if settings.default.derandomize:
        return (f"hypothesis profile {profile!r}: derandomized (each property test's seed is derived "
                f"from the test itself, the same on every run)")
    seed = config.getoption("--hypothesis-seed")
    return (f"hypothesis profile {profile!r}: random, seed {seed} "
            f"(again with --hypothesis-seed={seed}; CI=true derandomizes)")


def pytest_report_header(config: pytest.Config) -> list[str]:
    from e2e.scenarios import seed_from_environment
    from tests.conformance.corpus import shared_corpus_status

    return [hypothesis_line(config),
            f"scheduler comparison scenarios (e2e): seed {seed_from_environment()} (DRAQ_DIFF_SEED)",
            shared_corpus_status()]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """After failures, repeat the seed (`-q` hides the header)."""
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(hypothesis_line(config))
