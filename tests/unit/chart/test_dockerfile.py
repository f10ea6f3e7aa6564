"""The Dockerfile the chart's image comes from: a pinned slim base, two stages, wheels only, a numeric
non-root user, and the same install steps as the CI check that runs without a container builder."""

from __future__ import annotations

import re

from tests.unit.chart.support import CHART, REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
CHECK = (REPO / "scripts" / "check-image-install.sh").read_text()


def stages() -> list[str]:
    return re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[1:]


def test_the_base_is_a_slim_python_pinned_to_an_exact_release() -> None:
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert base is not None
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base.group(1)), base.group(1)
    assert all(stage.startswith("${PYTHON_IMAGE}") for stage in stages())


def test_two_stages_and_the_runtime_gets_only_the_virtualenv() -> None:
    build, runtime = stages()
    assert build.startswith("${PYTHON_IMAGE} AS build")
    assert "--only-binary=:all:" in build and "--no-index" in build
    copies = re.findall(r"^COPY .*$", runtime, re.MULTILINE)
    assert copies == ["COPY --from=build /opt/draq /opt/draq"]
    assert not re.search(r"\b(gcc|g\+\+|build-essential|apt-get|cc)\b", runtime)


def test_it_runs_as_a_numeric_non_root_user_and_starts_draq_run() -> None:
    runtime = stages()[-1]
    user = re.search(r"^USER (\d+):(\d+)$", runtime, re.MULTILINE)
    assert user is not None and int(user.group(1)) != 0 and int(user.group(2)) != 0
    assert 'ENTRYPOINT ["draq"]' in runtime and 'CMD ["run"]' in runtime
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime  # a read-only root file system
    values = (CHART / "values.yaml").read_text()
    assert f"runAsUser: {user.group(1)}" in values


def test_the_ci_check_installs_the_same_way_as_an_unprivileged_user() -> None:
    assert "--only-binary=:all: --no-binary=draq" in DOCKERFILE and "--only-binary=:all: --no-binary=draq" in CHECK
    assert "--no-index --find-links" in CHECK and "runuser -u" in CHECK
    assert '/bin/draq" run --help' in CHECK


def test_the_build_context_is_only_what_the_image_needs() -> None:
    ignored = [line for line in (REPO / ".dockerignore").read_text().splitlines() if not line.startswith("#")]
    assert ignored[0] == "*", "everything is left out first"
    assert {line for line in ignored if line.startswith("!")} == {"!pyproject.toml", "!README.md", "!admission/"}
