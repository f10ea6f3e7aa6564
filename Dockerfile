# draq's container image: `draq run` (operator and admission webhooks), as the Helm chart runs it.
#   docker build -t registry.example.com/draq:0.1.0 . && docker push registry.example.com/draq:0.1.0
# The base is pinned to an exact release; pin it by digest too where your registry policy asks for it
#   (--build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest>).
# scripts/check-image-install.sh runs the same install steps without a container builder (CI does).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ----- build: draq's wheel, its dependencies as published wheels, one virtualenv --------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY admission ./admission
# --only-binary: every dependency comes as a binary wheel, so no compiler is needed (the slim base has none).
# draq's wheel leaves the local-cluster kit (admission/localcluster/, `draq demo`) out: pyproject.toml
# excludes it from the packages, and the last step checks that the image has none of it.
RUN pip wheel --only-binary=:all: --no-binary=draq --wheel-dir /wheels . \
 && python -m venv /opt/draq \
 && /opt/draq/bin/pip install --no-index --find-links /wheels draq \
 && /opt/draq/bin/pip uninstall --yes pip \
 && cd / && /opt/draq/bin/python -I -c 'import admission.cli.main, importlib.util as u, sys; \
sys.exit("the local-cluster kit was installed" if u.find_spec("admission.localcluster") else 0)'

# ----- runtime: the same Python, the virtualenv, nothing else ----------------------------------------------
FROM ${PYTHON_IMAGE}
COPY --from=build /opt/draq /opt/draq
# A read-only root file system: no bytecode written at run time.
ENV PATH=/opt/draq/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Not root: a numeric user, so the kubelet can check runAsNonRoot (the chart runs it as 65532 too).
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["draq"]
CMD ["run"]
