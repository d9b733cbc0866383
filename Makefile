# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
EXTRAS ?= dev,spark

.PHONY: install test test-slow lint demo clean bench-deps interop-deps browser-deps system-deps \
	kafka-deps docker-engine

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

# Two pytest workers (pytest-xdist): most integration tests spend their time waiting on
# timeouts, so two overlap well on two cores. A file's tests share a worker (--dist loadfile), so
# a module-scoped cluster starts once and its tests run in order. (--dist loadgroup with
# xdist_group markers no longer grouped anything under pytest 9.2 + xdist 3.8: a module's tests
# ran on both workers, each starting its own cluster.) TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2

test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
	$(VENV)/bin/ruff check kafkawire storage cluster controller broker raft metadata analytics tests
	$(VENV)/bin/mypy

test-slow: install
	$(PY) -m pytest -m slow

lint: install
	$(VENV)/bin/ruff check kafkawire storage cluster controller broker raft metadata analytics tests
	$(VENV)/bin/mypy

demo: install
	$(PY) -m cluster.chaos.demo --dir demo-cluster

# Peers for `minikraft bench --compare` (BENCHMARKS.md); never needed by `make test`.
bench-deps: install
	apt-get update
	apt-get install -y etcd-server nats-server
	$(PY) -m pip install -q pysyncobj nats-py pyinstrument

# kcat for the real-client suite's kcat tests (skipped with a reason where it is missing).
interop-deps: install
	apt-get update
	apt-get install -y kcat

# Headless Chromium for the audit report's screenshot test (tests/spark/test_report_browser.py).
browser-deps:
	apt-get update
	apt-get install -y chromium

# The pinned Apache Kafka release (apache-kafka/pom.xml) from Maven Central into
# ~/.cache/minikraft/kafka-<version>/lib, once: Kafka's own tools against minikraft and the
# conformance scenarios (tests/conformance) skip with the reason without it. Needs mvn and Java 17.
kafka-deps:
	$(PYTHON) -m cluster.apache_kafka.deps

# Everything the default suite can use from Debian in one step (CI runs it as root): kcat, headless
# Chromium, the network-namespace tools of `up --network netns` (iproute2, nftables,
# iptables), Maven for `make kafka-deps`, and Docker's engine with Compose v1 and debootstrap
# for the compose tests. Without them those tests skip with the reason; nothing else needs them.
system-deps:
	apt-get update
	apt-get install -y kcat chromium iproute2 nftables iptables maven docker.io docker-compose \
		debootstrap

# A Docker engine for the compose tests: the running one, else (root) a private dockerd that
# leaves the host's firewall alone, and the base image (python:3.11-slim, else a Debian
# stand-in); cluster/launch/docker_engine.py. `--stop` stops the private dockerd.
docker-engine:
	$(PYTHON) -m cluster.launch.docker_engine

clean:
	rm -rf $(VENV) demo-cluster .pytest_cache .mypy_cache .ruff_cache
