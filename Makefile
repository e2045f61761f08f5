# DeerFlow Notebook — the two commands: `make demo` and `make test`.
# Each target creates .venv and installs the project on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output
LAB_ARGS ?=

.PHONY: demo test test-wheel lint typecheck lab bench docs clean

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

test: $(STAMP) lint typecheck
	@$(VENV)/bin/pytest -q -rs -p no:cacheprovider

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

lab: $(STAMP)
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

bench: $(STAMP)  # re-measure and rewrite the generated tables of docs/PERFORMANCE.md (bench/perf_doc.py)
	$(PY) bench/perf_doc.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .ruff_cache docs/_build docs/examples docs/_generated
