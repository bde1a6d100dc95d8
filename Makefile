# agentkit — the README names `make run` and `make test`; `make bench` and `make lint` are extras.
PORT ?= 8000
export PORT

.PHONY: run cluster test bench lint install demo llm-local

run:            ## venv, install, migrate, bootstrap, Redis + RQ worker + Daphne on 127.0.0.1:$(PORT)
	@bash scripts/run.sh

cluster:        ## PostgreSQL + Redis + WEB web processes on PORT… + WORKERS agent workers + 1 evolution (Procfile)
	@WEB=$(or $(WEB),2) WORKERS=$(or $(WORKERS),3) bash scripts/cluster.sh

test:           ## ruff, import-linter, the whole test suite (browser tests in their own run)
	@bash scripts/test.sh

bench:          ## benchmarks under bench/, results in bench/results/*.json
	@bash scripts/bench.sh

demo:           ## migrate, bootstrap, then run_tasks examples/suite.yaml (report: var/demo-report.json)
	@bash scripts/demo.sh

lint:           ## ruff check, ruff format --check, lint-imports
	@bash scripts/lint.sh

llm-local:      ## a real small model with no key: llama.cpp's server + SmolLM2-135M on 127.0.0.1:$(LLM_PORT) (default 8080)
	@bash -c 'source scripts/lib.sh && ensure_venv && "$$PY" -m tests.realmodel.llama --port $(or $(LLM_PORT),8080)'

install:        ## only create .venv and install dependencies
	@bash -c 'source scripts/lib.sh && ensure_venv'
