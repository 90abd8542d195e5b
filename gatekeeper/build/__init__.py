"""The build stage: compile a submission's C++/CUDA extensions in a sandboxed worker, with a
build cache keyed by the hash of the sources and flags (`cache.py`), a compile timeout, and
the first compiler error mapped back to its line in the Python file (`errors.py`)."""
