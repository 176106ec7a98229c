# Two entry points, both usable on a fresh machine with Python >= 3.11:
#   make demo   - set up .venv and run the main job on the embedded default
#   make test   - set up .venv with the test extras and run the whole suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# two pytest workers, one module each at a time (module fixtures stay in one process): the
# suite takes ~14 min on 2 cores against ~19 min serially; TEST_WORKERS=0 runs it serially
TEST_WORKERS ?= 2

.PHONY: demo test venv clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("Python >= 3.11 is required, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# the package alone for the demo; the test tools (moto, linkml, jupyter...: most of the
# download) only for the tests
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(BIN)/zv demo

# pytest exits 5 when it collected no tests: that must fail, never pass silently.
test: $(VENV)/.installed-test
	@$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

clean:
	rm -rf $(VENV) .cache demo-output
