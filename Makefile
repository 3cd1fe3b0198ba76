# Quick start:  make demo   (install, index a generated genome, map reads)
#               make test   (install test extras, run the test suite)
.PHONY: demo test bench

demo:
	bash scripts/demo.sh

test:
	bash scripts/install.sh test
	python3 -m ruff check .
	python3 -m pytest -q tests

bench:
	python3 benchmarks/exact_vs_bowtie.py
