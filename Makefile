# DeerFlow Notebook — the two commands: `make demo` and `make test`.
# Each target creates .venv and installs the project on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo-output

.PHONY: demo test lint lab bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing DeerFlow Notebook into $(VENV) (first run only)..."
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[all,test]"
	@# editable installs skip data files: put the extension's enabling config in place
	@mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	@cp extension/jupyter-config/jupyter_server_config.d/deerflow_jupyter.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	@touch $(STAMP)

demo: $(STAMP)
	@rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@env -u OPENAI_API_KEY DEERFLOW_HOME="$(CURDIR)/$(DEMO_DIR)/home" \
		$(VENV)/bin/deerflow --config notebooks/offline-config.yaml run \
		"Write a short research report and present it."
	@echo "Demo home: $(CURDIR)/$(DEMO_DIR)/home"

lint: $(STAMP)
	@$(VENV)/bin/ruff check harness extension deerflow_kernel tests bench

test: $(STAMP) lint
	@$(VENV)/bin/pytest -q -p no:cacheprovider

lab: $(STAMP)
	@$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) notebooks

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .ruff_cache
