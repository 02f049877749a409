# Roofline. `make run` serves the site with one worker (SQLite + embedded broker unless
# DATABASE_URL / REDIS_URL are set); `make test` runs the whole suite.
PY := .venv/bin/python
PORT ?= 8000
export DJANGO_SETTINGS_MODULE ?= practice.settings.dev

.PHONY: run test test-passes test-full lint selftest install sandbox system clean

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

# Three passes: everything else on both cores (pytest-xdist; `worksteal` evens out the slow
# tail), then the tests with timing bounds on real processes (`timed`: they mostly wait on
# outage clocks and workers, and each has its own Redis port and folder, so four run at once),
# then the ones that load every core on purpose (`alone`). Each pass prints its ten slowest.
# The Docker engine (scripts/docker_engine.sh): one already running is used; as root, one is
# started for the run and stopped after it; else the Docker tests skip. The images they run are
# built first (scripts/docker_images.sh: nothing to do without an engine).
test: install system sandbox
	$(PY) -m ruff check .
	bash scripts/docker_engine.sh run $(MAKE) --no-print-directory test-passes

test-passes:
	bash scripts/docker_images.sh
	DJANGO_SETTINGS_MODULE=practice.settings.test $(PY) -m pytest -q -n 2 --dist worksteal -m "not timed and not alone"
	DJANGO_SETTINGS_MODULE=practice.settings.test $(PY) -m pytest -q -n 4 --dist worksteal -m timed
	DJANGO_SETTINGS_MODULE=practice.settings.test $(PY) -m pytest -q -m alone

# What `make test` leaves out for time: the Chromium walk through every part of every exercise
# (`make test` walks one exercise per part type) and the command-line contract over every
# exercise. CI runs it after `make test`.
test-full: install system sandbox
	DJANGO_SETTINGS_MODULE=practice.settings.test ROOFLINE_TEST_FULL=1 $(PY) -m pytest -q -n 2 -m full
	@if [ -f ../shared/tools/cli_contract.py ]; then $(PY) ../shared/tools/cli_contract.py; fi

selftest: install sandbox
	$(PY) manage.py selftest

lint: install
	$(PY) -m ruff check .

clean:
	rm -rf var .venv
