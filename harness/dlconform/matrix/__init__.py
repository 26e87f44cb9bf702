"""The compatibility matrix: results from many runs merged into one data set (`merge.py`,
`dlconform merge`), every Debian tier and the host run and merged (`run.py`, `make matrix`),
and synthetic results for tests and benchmarks (`synthetic.py`). The renderers are in
report/ (matrix_view, matrix_md, html)."""
