"""Is the admission loop alive, and is it ready? Decided from times and flags the shell observes."""

from __future__ import annotations


def loop_stall(now: float, pass_started: float | None, pending_since: float | None, bound: float) -> str:
    """Why the loop looks stuck ("" when it does not): a pass that has run longer than `bound`
    seconds, or changes pending for longer than `bound` with no pass ended since they were seen.
    Times are seconds on one monotonic clock."""
    if pass_started is not None and now - pass_started > bound:
        return f"a reconcile pass has been running for {now - pass_started:.0f}s (bound {bound:.0f}s)"
    if pass_started is None and pending_since is not None and now - pending_since > bound:
        return (f"changes have been pending for {now - pending_since:.0f}s and no reconcile pass ran "
                f"(bound {bound:.0f}s)")
    return ""


def loop_unready(synced: bool, leading: bool, completed_passes: int) -> str:
    """Why the operator is not ready ("" when it is): its caches have not listed everything yet, or it
    leads and has not completed its first pass. A replica that does not lead is ready once synced."""
    if not synced:
        return "the caches have not listed every resource yet"
    if leading and completed_passes == 0:
        return "leading, and the first admission cycle has not completed yet"
    return ""
