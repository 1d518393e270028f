# The two set-up commands are `make demo` and `make test`; both create .venv and install what is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO ?= examples/dgx-h100-70b-finetune.json
PYTEST_WORKERS ?= 2

.PHONY: demo demo-lta test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever the dependency list changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Evaluates the bundled example with no configuration: prints the checklist, writes the record and its PDF
# (a DRAFT: a record is signed only once approvers approve it through the API).
demo: $(STAMP)
	@mkdir -p out
	@$(BIN)/quotecheck evaluate $(DEMO) --out out/record.json; rc=$$?; \
	  if [ $$rc -gt 1 ]; then exit $$rc; fi
	@$(BIN)/quotecheck pdf out/record.json --out out/record.pdf
	@echo; echo "record written to out/record.json, its draft PDF to out/record.pdf"

# Signs the demo quote PAdES B-LTA against a loopback test PKI (Certomancer's CA, OCSP responder, CRL and TSA on
# 127.0.0.1, stopped afterwards), through the API as a submitter, a reviewer (waivers) and an approver; then
# verifies the downloaded PDF offline with the PKI's root certificate only.
demo-lta: $(STAMP)
	@$(BIN)/python -m service.cli.demo_lta $(DEMO) --out out
	@$(BIN)/quotecheck verify out/record-lta.pdf --key out/pki-root.cert.pem

# Two processes by default (the development machine has two cores); PYTEST_WORKERS=0 runs the suite in one.
test: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) out .pytest_cache
