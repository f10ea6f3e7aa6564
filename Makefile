# draq: one entry point for people and CI. `make demo` runs the main job locally; `make test` runs every test.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup deps controlplane helm actionlint controllers demo test lint unit e2e e2e-alpha e2e-gangs e2e-releases chart chart-sync image-check bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,local]'
	rm -f $(VENV)/.installed-* && touch $@

deps:
	bash scripts/install-deps.sh

controlplane: $(STAMP) deps
	$(BIN)/python -m admission.localcluster.build

# Helm, for the chart's checks: built from the Go module proxy, cached in ~/.cache/draq/helm/<version>/.
helm: $(STAMP)
	$(BIN)/python -m admission.localcluster.helm

# actionlint, for the release workflow (.github/workflows/release.yml): built like Helm, cached in
# ~/.cache/draq/actionlint/<version>/ (e2e/test_chart.py builds it on first use too).
actionlint: $(STAMP)
	$(BIN)/python -m admission.localcluster.actionlint

# The real workload controllers draq integrates with (KubeRay, Kubeflow training operator): built from the
# Go module proxy, cached with their CRDs in ~/.cache/draq/controllers/<name>/<version>/.
controllers: $(STAMP)
	$(BIN)/python -m admission.localcluster.controllers

setup: controlplane helm controllers

demo: setup
	$(BIN)/draq demo

lint: $(STAMP)
	$(BIN)/ruff check admission tests e2e bench conftest.py
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/chart.py check

unit: $(STAMP)
	$(BIN)/pytest tests

e2e: setup
	$(BIN)/pytest e2e

# Kubernetes 1.35 (v1.35.8), whose DRA features beyond the basics and whose v1alpha1 gang API are behind
# alpha gates: the allocator differential and the gap report with the alpha DRA gates on (partitions,
# taints, consumable capacity, extended resources through DRA, ...), the group-level
# differential with native gang scheduling on too, and `draq run` making v1alpha1 Workloads. Then the
# allocator differential on 1.37 (v1.37.2) with the 1.37 alphas draq models on (compatibility groups,
# optional node operations, derived attributes): 50 trials, about 50 s.
e2e-alpha: setup
	$(BIN)/python -m admission.localcluster.build --kubernetes-version 1.35
	DRAQ_KUBERNETES_VERSION=1.35 DRAQ_ALPHA_DRA=1 DRAQ_ALPHA_GANGS=1 DRAQ_GANG_TRIALS=5 $(BIN)/pytest \
		e2e/test_allocator_vs_scheduler.py e2e/test_gaps.py \
		e2e/test_gang_differential.py::test_with_native_gangs_too e2e/test_native_gang_apis.py \
		e2e/test_closed_loop.py::test_native_gang_members_get_their_workload_and_bind
	$(BIN)/python -m admission.localcluster.build --kubernetes-version 1.37
	DRAQ_KUBERNETES_VERSION=1.37 DRAQ_ALPHA_DRA=1 DRAQ_DIFF_TRIALS=50 $(BIN)/pytest e2e/test_allocator_vs_scheduler.py

# The allocator-vs-scheduler differential on the older supported releases with their default gates
# (`make test` runs it on the default, v1.37.2; 1.36 has partitions, device taints, consumable capacity
# and binding conditions on by default, 1.35 none of them).
RELEASE_TRIALS ?= 60
e2e-releases: setup
	for v in 1.35 1.36; do \
		$(BIN)/python -m admission.localcluster.build --kubernetes-version $$v || exit 1; \
		DRAQ_KUBERNETES_VERSION=$$v DRAQ_DIFF_TRIALS=$(RELEASE_TRIALS) $(BIN)/pytest e2e/test_allocator_vs_scheduler.py \
			|| exit 1; \
	done

# Native gangs on the releases whose gang API followed 1.35's v1alpha1 Workload: v1alpha2 PodGroups
# (v1.36.3) and v1beta1 PodGroups (v1.37.2, gate GenericWorkload), one control plane each: the group-level
# differential, and `draq run` setting the pod field and making the PodGroup.
e2e-gangs: setup
	$(BIN)/python -m admission.localcluster.build --kubernetes-version 1.36
	DRAQ_ALPHA_GANGS=1 DRAQ_GANG_VERSIONS=1.36,1.37 DRAQ_GANG_TRIALS=5 $(BIN)/pytest \
		e2e/test_gang_differential.py::test_with_native_gangs_too e2e/test_native_gang_apis.py

# The Helm chart: derived files current, then its unit tests and its tests on the local control plane.
chart: setup actionlint
	$(BIN)/python scripts/chart.py check
	$(BIN)/pytest tests/unit/chart e2e/test_chart.py

# Rewrite the chart's derived files (CRD and dashboard copies, webhook configurations, values table).
chart-sync: $(STAMP)
	$(BIN)/python scripts/chart.py sync

# The container image's install step, as an unprivileged user, without a container builder.
image-check:
	PYTHON=$(PYTHON) bash scripts/check-image-install.sh

test: setup lint image-check
	$(BIN)/pytest

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The benchmarks' quick mode (CI): each figure as a ratio to a reference workload timed in the same run,
# failing only on a 3x regression from bench/quick_reference.json (see docs/performance.md).
bench-quick: $(STAMP)
	PYTHONPATH=$(CURDIR) $(BIN)/python bench/quick.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
