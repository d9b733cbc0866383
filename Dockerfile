# One image for every minikraft node (docker-compose.yml). Two stages: the first installs the
# package and its dependencies into a virtualenv; the second is the base image plus that
# virtualenv and nothing else (no pip cache, build backend, tests or sources beyond the package).
# BASE_IMAGE: the official python:3.11-slim on a machine that can pull it; a local stand-in
# built from Debian's packages where none can (cluster/launch/docker_engine.py, README).
# Classic-builder syntax only: docker-compose 1.29 builds without BuildKit.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The dependencies first, in a layer keyed by pyproject.toml alone, so a change to the sources
# does not download them again (the package's directories and README are empty stand-ins here).
COPY pyproject.toml ./
RUN python -m venv /opt/minikraft \
    && touch README.md \
    && for p in kafkawire storage metadata raft controller broker cluster analytics; do \
         mkdir -p "$p" && touch "$p/__init__.py"; done \
    && /opt/minikraft/bin/pip install . \
    && /opt/minikraft/bin/pip uninstall -y -q minikraft
COPY README.md ./
COPY kafkawire ./kafkawire
COPY storage ./storage
COPY metadata ./metadata
COPY raft ./raft
COPY controller ./controller
COPY broker ./broker
COPY cluster ./cluster
COPY analytics ./analytics
# Byte-compiled here: at run time the node's user cannot write next to the sources.
RUN /opt/minikraft/bin/pip install --no-deps . \
    && /opt/minikraft/bin/pip uninstall -y -q pip setuptools

FROM ${BASE_IMAGE}
ENV PYTHONUNBUFFERED=1 \
    PATH=/opt/minikraft/bin:$PATH
COPY --from=build /opt/minikraft /opt/minikraft
# The nodes run as minikraft (uid 1000). The entry point starts as root only to hand a fresh
# bind-mounted data directory to that user (Docker creates a missing one as root), then drops to
# it before running `minikraft` (cluster/launch/container_init.py).
RUN useradd --system --uid 1000 --user-group --no-create-home --home-dir /var/lib/minikraft \
        --shell /usr/sbin/nologin minikraft \
    && mkdir -p /var/lib/minikraft /var/lib/minikraft-journal \
    && chown minikraft:minikraft /var/lib/minikraft /var/lib/minikraft-journal
WORKDIR /var/lib/minikraft
ENTRYPOINT ["python", "-m", "cluster.launch.container_init"]
CMD ["--help"]
