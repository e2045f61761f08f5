# DeerFlow Notebook — the two commands: `make demo` and `make test`.
# Each target creates .venv and installs the project on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output
LAB_ARGS ?=

.PHONY: demo test test-wheel lint typecheck lab labext bench docs clean

# The server config enables the extension: reinstall when it changes.
$(STAMP): pyproject.toml extension/jupyter-config/jupyter_server_config.d/deerflow_jupyter.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing DeerFlow Notebook into $(VENV) (first run only)..."
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[all,test,docs]"
	@# editable installs skip data files: put the extension's enabling config in place (the extension
	@# makes DeerFlow the default chat persona; jupyterlab-chat and the persona manager enable themselves)
	@mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	@cp extension/jupyter-config/jupyter_server_config.d/deerflow_jupyter.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	@touch $(STAMP)

# The JupyterLab extension, built (committed, see `labext`) and found by the venv's JupyterLab: the wheel
# installs it as data; an editable install gets a link to the checkout's build, so a rebuild shows at once.
LABEXT_NAME := deerflow-jupyterlab
LABEXT_BUILT := extension/jupyter-data/labextensions/$(LABEXT_NAME)
LABEXT_LINK := $(VENV)/share/jupyter/labextensions/$(LABEXT_NAME)
$(LABEXT_LINK): | $(STAMP)
	@mkdir -p $(dir $@)
	@ln -sfn $(CURDIR)/$(LABEXT_BUILT) $@

# Executes notebooks/01_research_quickstart.ipynb headless (nbclient) on the offline model;
# the executed notebook, the artifacts and DEERFLOW_HOME all go to $(DEMO_DIR)/.
demo: $(STAMP)
	@env -u OPENAI_API_KEY -u DEERFLOW_SERVER_URL $(PY) -m deerflow_kernel.demo \
		notebooks/01_research_quickstart.ipynb --out $(DEMO_DIR)

lint: $(STAMP)
	@$(VENV)/bin/ruff check harness extension deerflow_kernel tests bench

# pyright in standard mode ([tool.pyright] in pyproject.toml): zero errors, no baseline. The wheel carries
# pyright and, with [nodejs], Node.js; the warning about newer releases is off (it asks PyPI each run).
typecheck: $(STAMP)
	@PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(VENV)/bin/pyright

# Two pytest workers (pytest-xdist), each test file on one worker so its module fixtures are shared:
# most of the suite waits on servers, kernels and browsers it starts, so two files at a time use the
# machine's two cores. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
test: $(STAMP) $(LABEXT_LINK) lint typecheck
	@$(VENV)/bin/pytest -q -rs --durations=15 -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

# Builds the wheel, installs it (not editable, all dependencies from PyPI; pip's cache is reused)
# into a fresh venv outside the repository and checks demo, skills, the server extension and the
# persona from an empty directory (tests/integration/test_wheel_install.py). Minutes: not in `make test`.
test-wheel: $(STAMP)
	@DEERFLOW_TEST_WHEEL=1 $(VENV)/bin/pytest -q -rs -p no:cacheprovider tests/integration/test_wheel_install.py

# The documentation site into docs/_build/html, warnings as errors. The example notebooks are executed while it
# builds (offline: docs/conf.py); DOCS_ARGS passes options to sphinx-build (e.g. DOCS_ARGS=-E for a full rebuild).
DOCS_ARGS ?=
docs: $(STAMP)
	@$(VENV)/bin/sphinx-build -W --keep-going -j auto -b html $(DOCS_ARGS) docs docs/_build/html

lab: $(STAMP) $(LABEXT_LINK)
	@cfg="$${DEERFLOW_CONFIG:-}"; \
	if [ -z "$$cfg" ] && [ ! -f config.yaml ] && [ ! -f "$${DEERFLOW_HOME:-$$HOME/.deerflow}/config.yaml" ]; then \
		cfg="$(CURDIR)/notebooks/offline-config.yaml"; \
		echo "No config.yaml found: using the offline example config ($$cfg). See README to use a real model."; \
	fi; \
	export JUPYTERLAB_WORKSPACES_DIR="$(abspath $(VENV))/lab-workspaces"; \
	$(VENV)/bin/jupyter lab workspaces import extension/jupyter-config/deerflow-workspace.json >/dev/null 2>&1 \
		|| echo "Could not set up the notebooks' workspace: JupyterLab opens without them."; \
	DEERFLOW_CONFIG="$$cfg" $(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)/notebooks" \
		--LabApp.workspaces_dir="$$JUPYTERLAB_WORKSPACES_DIR" --LabApp.default_url=/lab/workspaces/deerflow \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root ) $(LAB_ARGS)

# Rebuilds the JupyterLab extension from labextension/ (TypeScript; needs Node 18+ and npm) into $(LABEXT_BUILT),
# against the venv's JupyterLab, and records the sources' digest there (tests/unit/test_labext_build.py fails
# when the committed build is older than its sources). Commit the result: nothing else needs npm.
labextension/node_modules/.package-lock.json: labextension/package-lock.json
	@cd labextension && npm ci --no-audit --no-fund
labext: $(STAMP) labextension/node_modules/.package-lock.json
	@cd labextension && npx tsc
	@node labextension/node_modules/@jupyterlab/builder/lib/build-labextension.js \
		--core-path "$$($(PY) -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')" \
		labextension
	@cp labextension/install.json $(LABEXT_BUILT)/  # `jupyter labextension list`: "(python, deerflow-notebook)"
	@$(PY) labextension/source_hash.py record

BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): pyproject.toml | $(STAMP)  # the bench extra: deepagents, the second peer of bench/harness_overhead.py
	@$(PY) -m pip install --quiet -e ".[bench]"
	@touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)  # re-measure and rewrite the generated tables of docs/PERFORMANCE.md (bench/perf_doc.py)
	$(PY) bench/perf_doc.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) labextension/lib labextension/tsconfig.tsbuildinfo .pytest_cache .ruff_cache docs/_build docs/examples docs/_generated
