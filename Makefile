# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
EXTRAS ?= dev,spark

.PHONY: install test test-slow lint demo clean bench-deps browser-deps

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

test: install
	$(PY) -m pytest
	$(VENV)/bin/ruff check cluster controller broker raft analytics tests
	$(VENV)/bin/mypy

test-slow: install
	$(PY) -m pytest -m slow

lint: install
	$(VENV)/bin/ruff check cluster controller broker raft analytics tests
	$(VENV)/bin/mypy

demo: install
	$(PY) -m cluster.launch.demo --dir demo-cluster

# Peers for `minikraft bench --compare` (BENCHMARKS.md); never needed by `make test`.
bench-deps: install
	apt-get update
	apt-get install -y etcd-server nats-server
	$(PY) -m pip install -q pysyncobj nats-py pyinstrument

# Headless Chromium for the audit report's screenshot test (tests/spark/test_report_browser.py).
browser-deps:
	apt-get update
	apt-get install -y chromium

clean:
	rm -rf $(VENV) demo-cluster .pytest_cache .mypy_cache .ruff_cache
