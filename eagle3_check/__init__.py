"""eagle3_check: a test-and-validation harness for EAGLE-3 speculative decoding (greedy verification).

The library is importable without the CLI; see README.md, DESIGN.md and docs/.
"""

__version__ = "0.1.0"
