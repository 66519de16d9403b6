# hw4p1. On a fresh clone, `make test` and `make train` are the only two commands you need:
# every target below builds the virtual environment it runs in.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON_SYSTEM ?= python3
VENV          := .venv
PY            := $(VENV)/bin/python
STAMP         := $(VENV)/.installed-stamp
export WANDB_MODE ?= disabled
export PYTHONHASHSEED := 0

CONFIG    ?= configs/default.yaml
SEED      ?= 0
DATA_DIR  ?= hw4_data/hw4p1_data
PYTEST_WORKERS ?= 2
# The fast suite: everything make test runs but what is marked slow.
FAST_MARKERS := not slow and not long and not platforms and not class_fixture and not catalogue_sweep and not measurement

.PHONY: help install test test-fast train data data-if-stale tokenizers handin gpu-check handout autograde figures \
	bench lint mutants mutation slow-tests test-ci test-class test-long test-platforms regrade rescore similarity gradebook class-fixture clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 22

install: $(STAMP) ## create .venv and install requirements.txt (idempotent)

$(STAMP): requirements.txt requirements-grader.txt
	test -x $(PY) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

test: data-if-stale ## run the test suite (slow end-to-end tests included)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not long and not platforms and not class_fixture and not catalogue_sweep and not measurement" tests

test-fast: data-if-stale ## run the suite without the tests marked slow
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "$(FAST_MARKERS)" tests

# Builds the default data unless DATA_DIR holds this SEED's data from this version of the
# generator (its .complete marker records both) or data built from real text.
data-if-stale: $(STAMP)
	$(PY) -m datagen.build_data --out $(DATA_DIR) --seed $(SEED) --if-stale

data: $(STAMP) ## build hw4_data/hw4p1_data (LIBRISPEECH=/path or TEXT="a.txt b.txt" for real text)
	$(PY) -m datagen.build_data --out $(DATA_DIR) --seed $(SEED) \
		$(if $(LIBRISPEECH),--librispeech $(LIBRISPEECH)) $(if $(TEXT),--text $(TEXT))

tokenizers: data-if-stale ## retrain the four tokenizers on the train split
	$(PY) -m datagen.build_tokenizers --data $(DATA_DIR) --seed $(SEED)

train: data-if-stale ## train CONFIG (default configs/default.yaml), evaluate, then pack handin.tar
	$(PY) -m hw4lib.train --config $(CONFIG)
	$(MAKE) --no-print-directory handin

handin: $(STAMP) ## pack handin.tar from the latest complete run (RUN=<name> to pick one)
	$(PY) -m hw4lib.handin $(if $(RUN),--run $(RUN))

# Any Python with torch runs the check (on Colab: python -m hw4lib.gpu_check); PYTHON=... picks
# one instead of .venv's, which is then not built.
gpu-check: $(if $(PYTHON),,$(STAMP)) ## the GPU acceptance: checks, student tests and speed targets on the GPU (PYTHON=... to use another)
	$(or $(PYTHON),$(PY)) -m hw4lib.gpu_check

# BEGIN INSTRUCTOR TARGETS
handout: $(STAMP) ## write dist/handout/ and dist/handout.tar.gz for students [ARGS='--full-marks-ppl X --zero-marks-ppl Y']
	$(PY) -m tools.make_handout $(ARGS)

autograde: $(STAMP) ## write dist/autograde.tar + dist/autograde-Makefile (Autolab), dist/gradescope.zip [ARGS=...]
	$(PY) -m tools.make_autograde $(ARGS)

regrade: $(STAMP) ## grade every handin of a bulk download: HANDINS=folder [JOBS=2] [OUT=regrade] [ARGS=...]
	$(if $(HANDINS),,$(error give HANDINS=<the folder of a bulk download>))
	$(PY) -m autograder.classroom.regrade $(HANDINS) --jobs $(or $(JOBS),1) --out $(or $(OUT),regrade) $(ARGS)

rescore: $(STAMP) ## recompute grades.csv's points under dist/'s scoring line, grading nothing: [OUT=regrade] [ARGS=...]
	$(PY) -m autograder.classroom.regrade --rescore-only --out $(or $(OUT),regrade) $(ARGS)

similarity: $(STAMP) ## compare every pair of students' mytorch: HANDINS=folder [OUT=similarity] [ARGS=...]
	$(if $(HANDINS),,$(error give HANDINS=<the folder of a bulk download>))
	$(PY) -m autograder.classroom.similarity $(HANDINS) --out $(or $(OUT),similarity) $(ARGS)

gradebook: $(STAMP) ## grades.csv + a Canvas roster export -> Canvas and Autolab import CSVs (no ROSTER: Autolab's alone): ROSTER=file [GRADES=regrade/grades.csv] [OUT=gradebook] [ARGS='--domain D --due T --extensions F ...']
	$(if $(ROSTER),,$(error give ROSTER=<Canvas's Gradebook export, a CSV>))
	$(PY) -m autograder.classroom.gradebook $(ROSTER) --grades $(or $(GRADES),regrade/grades.csv) --out $(or $(OUT),gradebook) $(ARGS)

class-fixture: $(STAMP) ## build (or reuse from its cache) the realistic class of tools/class_fixture.py: [OUT=class-fixture]
	$(PY) -m tools.class_fixture --out $(or $(OUT),class-fixture)

figures: $(STAMP) ## redraw the diagrams in figures/
	$(PY) -m tools.draw_figures

bench: $(STAMP) ## print speed and memory measurements (mytorch, data, model, training)
	$(PY) -m bench $(BENCH)

test-long: data-if-stale ## the end-to-end tests of 20 s or more (the notebook, attacks, data digests), which CI runs
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m long tests

test-class: data-if-stale ## grade the realistic class (tools/class_fixture.py) and check every cell of its table
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m class_fixture tests

# $(call pytest_with_table,ARGS): pytest with ARGS, the platform rows it runs recorded in
# dist/platform-table and printed as the attacks x profiles table at the end.
pytest_with_table = rm -rf dist/platform-table && mkdir -p dist/platform-table && \
	{ HW4P1_PROFILE_TABLE=$(CURDIR)/dist/platform-table $(PY) -m pytest $(1); status=$$?; \
	$(PY) tools/platform_profiles.py --table dist/platform-table; exit $$status; }

test-platforms: data-if-stale ## the grader's attacks in emulated Gradescope, Autolab and laptop profiles (root)
	$(call pytest_with_table,-n $(PYTEST_WORKERS) -m platforms tests)

test-ci: data-if-stale ## what make test, test-long, test-class and test-platforms run, in one session, longest first (CI)
	$(call pytest_with_table,-n $(PYTEST_WORKERS) --dist worksteal -p tools.ci_order \
		-m "not catalogue_sweep and not measurement" tests)

slow-tests: $(STAMP) ## time the fast suite once; fails naming each unmarked test over SLOW_S seconds (default 10)
	$(PY) -m tools.slow_tests --markers "$(FAST_MARKERS)" --workers $(PYTEST_WORKERS) $(if $(SLOW_S),--threshold $(SLOW_S))

lint: $(STAMP) ## ruff with pyproject.toml's rules (CI runs it)
	$(PY) -m ruff check .

# One judging pass (tools/hint_report.py, in two processes) grades the reference, each graded
# entry and the negative set 3 times; the catalogue_sweep test runs it, prints its report and
# fails on any problem. With ONLY, the hint report prints the pass over those entries.
mutants: $(STAMP) ## check that the tests reject every bug in tools/mutant_catalogue/, then grade each graded entry and the negative set 3 times (its hints, its scores; ONLY=glob: those entries)
	status=0; $(PY) -m tools.mutants $(if $(ONLY),--only '$(ONLY)') || status=1; \
	$(if $(ONLY),$(PY) -m tools.hint_report --only '$(ONLY)', \
		$(PY) -m pytest -p no:xdist -s -m catalogue_sweep tests) || status=1; \
	exit $$status

# tools/mutation.py: cosmic-ray's mutants of the project's own code (the files of pyproject.toml's
# [tool.mutation] table), each judged by the test files the table maps its file to.
mutation: $(STAMP) ## mutation-test the project's own code: [FILES="a.py b.py"] [CHANGED=1: the lines changed since tools/mutation_base.txt] [BUDGET=s] [SET_BASE=1: record HEAD as the base]
	$(PY) -m tools.mutation $(FILES) $(if $(CHANGED),--changed) $(if $(BUDGET),--budget $(BUDGET)) \
		$(if $(SET_BASE),--set-base)
# END INSTRUCTOR TARGETS

clean: ## remove built data, runs, dist/ and caches (keeps .venv)
	rm -rf expts dist handin handin.tar $(DATA_DIR) .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
