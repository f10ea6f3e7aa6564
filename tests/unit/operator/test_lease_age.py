"""How long a Lease has certainly gone unwritten, by the API server's clock alone."""

from __future__ import annotations

import datetime as dt

from admission.core.leadership import age_on_server

NOW = dt.datetime(2026, 3, 1, 12, 0, 30, tzinfo=dt.UTC)


def lease(*times: str) -> dict[str, object]:
    return {"metadata": {"managedFields": [{"manager": f"m{i}", "time": t} for i, t in enumerate(times)]}}


def test_the_latest_write_counts_less_a_second_for_whole_second_stamps() -> None:
    assert age_on_server(lease("2026-03-01T12:00:10Z", "2026-03-01T12:00:20Z"), NOW) == 9.0


def test_unknown_or_unusable_times_give_no_age() -> None:
    assert age_on_server(lease("2026-03-01T12:00:10Z"), None) == 0.0
    assert age_on_server(lease(), NOW) == 0.0
    assert age_on_server(lease("yesterday"), NOW) == 0.0
    assert age_on_server(lease("2026-03-01T12:00:10"), NOW) == 0.0  # no zone: not the server's stamp
    assert age_on_server(lease("2026-03-01T12:00:30Z"), NOW) == 0.0  # written this very second
    assert age_on_server({"metadata": None}, NOW) == 0.0
