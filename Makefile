# The newcomer's entry points. `make demo` runs memfs for real on a local
# `memfs serve` with a demo store; `make test` sets up and runs the suite.
# Both install first (idempotent, and quick when already done): the demo only
# what memfs needs to run, `install` (and `test`) the test tools too.

VENV := .venv
PY := $(VENV)/bin/python
# mypy checks all of memfs, strictly (pyproject.toml's [tool.mypy]).
MYPY_PATHS := memfs

.PHONY: install demo test soak posix bench lint format clean

install:
	@bash scripts/install.sh test

# memfs alone, as the wheel installs it (scripts/check_wheel.sh): no test
# extras, no npm packages.
demo:
	@bash scripts/install.sh none
	@bash scripts/demo.sh

# The TypeScript recipe's packages, when install could fetch them (see scripts/install.sh).
test: install
	MEMFS_TEST_NODE_MODULES=$${MEMFS_TEST_NODE_MODULES:-$(CURDIR)/build/node_modules} \
		$(VENV)/bin/pytest -q -n 3 --dist loadfile

# pjdfstest (built from ../shared/tools/pjdfstest-src.tar.gz), every category,
# in a mount as root; `make test` runs most of it. Failures not in
# tests/posix/expected-failures.txt (or listed ones that pass now) fail it.
posix: install
	MEMFS_POSIX=all $(VENV)/bin/pytest -q -s tests/system/test_posix.py

# The model-based test, the fault and kill soaks and the in-process sync soak, long.
soak: install
	HYPOTHESIS_PROFILE=soak MEMFS_SOAK_SECONDS=300 MEMFS_SOAK_KILLS=50 MEMFS_SOAK_SEEDS=1000 \
		$(VENV)/bin/pytest -q -n 3 --dist loadfile tests/mount/test_model.py \
		tests/system/test_soak.py tests/system/test_sync_soak_inprocess.py

bench: install
	@bash scripts/install.sh test,bench
	@[ -x build/memfs_ll/build/example/memfs_ll ] || bash scripts/build_memfs_ll.sh \
		|| echo "memfs_ll not built: agent_workload.py skips it"
	$(PY) bench/server_bench.py
	$(PY) bench/agent_workload.py
	$(PY) bench/scale_bench.py
	$(PY) bench/reference_bench.py

# ruff, the import contracts of pyproject.toml (the layers, no circle), and mypy.
lint: install
	$(VENV)/bin/ruff check memfs tests bench
	$(VENV)/bin/ruff format --check memfs tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy $(MYPY_PATHS)

format: install
	$(VENV)/bin/ruff format memfs tests bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .import_linter_cache bench/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
