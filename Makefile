# Roofline. `make run` serves the site with one worker (SQLite + embedded broker unless
# DATABASE_URL / REDIS_URL are set); `make test` runs the whole suite.
PY := .venv/bin/python
PORT ?= 8000
export DJANGO_SETTINGS_MODULE ?= practice.settings.dev

.PHONY: run test lint selftest install sandbox system clean

.venv/installed: pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: .venv/installed

system:
	bash scripts/install_system.sh

sandbox: install
	bash scripts/install_sandbox.sh

run: install system sandbox
	mkdir -p var
	$(PY) manage.py migrate --noinput
	$(PY) manage.py sync_exercises
	$(PY) manage.py seed_demo
	@echo "Open http://127.0.0.1:$(PORT)/  (student / student-demo)"
	bash scripts/run_local.sh $(PORT)

test: install system sandbox
	$(PY) -m ruff check .
	DJANGO_SETTINGS_MODULE=practice.settings.test $(PY) -m pytest -q
	@if [ -f ../shared/tools/cli_contract.py ]; then $(PY) ../shared/tools/cli_contract.py; fi

selftest: install sandbox
	$(PY) manage.py selftest

lint: install
	$(PY) -m ruff check .

clean:
	rm -rf var .venv
