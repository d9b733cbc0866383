# One image for every minikraft node (docker-compose.yml); the entry point is the `minikraft`
# command, so a service's `command:` is what follows it (`controller --format-if-needed`).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/minikraft
COPY pyproject.toml README.md ./
COPY cluster ./cluster
COPY controller ./controller
COPY broker ./broker
COPY raft ./raft
COPY analytics ./analytics
RUN pip install . \
    && useradd --system --uid 1000 --home-dir /var/lib/minikraft minikraft \
    && mkdir -p /var/lib/minikraft /var/lib/minikraft-journal \
    && chown minikraft:minikraft /var/lib/minikraft /var/lib/minikraft-journal

# Named volumes mount here; a new volume takes this directory's owner.
VOLUME ["/var/lib/minikraft"]
USER minikraft
ENTRYPOINT ["minikraft"]
CMD ["--help"]
