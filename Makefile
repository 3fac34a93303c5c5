# The README names these targets. `make demo` and `make test` work on a fresh clone:
# they bootstrap uv, install the locked dependencies and start the Kafka broker themselves.

UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
RUN := $(UV) run --frozen

.PHONY: demo test test-unit test-integration test-e2e soak soak-large bench bench-quick screenshots lint fmt typecheck kafka sync clean

demo: sync  ## run the demo pipeline on a local broker (no API key needed)
	$(RUN) sluicegate demo

test: sync  ## set everything up and run every test (starts its own Kafka broker)
	bash .ci/install-compose
	bash .ci/install-prometheus
	bash .ci/install-jaeger >/dev/null
	bash .ci/install-kustomize >/dev/null
	$(RUN) pytest

test-unit: sync  ## tests that need no broker
	$(RUN) pytest tests/unit

test-integration: sync  ## tests against a real broker
	$(RUN) pytest tests/integration

test-e2e: sync  ## real coordinator and worker processes, killed with SIGKILL
	$(RUN) pytest tests/e2e

soak: sync  ## the chaos tests at full size: 200k lines / 12 SIGKILLs; 500 agent runs / 10 kills
	SLUICEGATE_CHAOS_LINES=200000 SLUICEGATE_CHAOS_KILLS=12 \
	SLUICEGATE_AGENT_CHAOS_RUNS=500 SLUICEGATE_AGENT_CHAOS_KILLS=10 $(RUN) pytest tests/e2e -k sigkill

# Not in CI: about 10,000 agent runs, 100 SIGKILLs, a broker restart and a storage outage, then
# every run, effect and event checked (an hour or more). SOAK_ARGS=--quick: 400 runs, 10 kills.
soak-large: sync  ## reliability at scale, measured: prints the table, exits 1 on a violation
	$(RUN) python -m bench.soak_large $(SOAK_ARGS)

bench: sync  ## every benchmark on one broker: tables, bench/out/report.md and PNG plots
	$(RUN) python -m bench.run_all

screenshots: sync  ## retake the console screenshots in docs/images (a real browser, broker and job)
	SLUICEGATE_UPDATE_SCREENSHOTS=1 $(RUN) pytest tests/integration/console -q

bench-quick: sync  ## the same at small sizes (a few minutes): checks that they work
	$(RUN) python -m bench.run_all --quick

lint: sync
	$(RUN) ruff check .
	$(RUN) ruff format --check .

fmt: sync
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

typecheck: sync
	$(RUN) mypy

kafka: sync  ## run the development broker on 127.0.0.1:9092 until Ctrl-C
	$(RUN) sluicegate dev kafka

sync: $(UV)
	$(UV) sync --frozen --quiet

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet uv==$(UV_VERSION)

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache .hypothesis
