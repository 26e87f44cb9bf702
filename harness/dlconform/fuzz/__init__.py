"""The Python half of the fuzz targets in fuzz/ (fuzz/README.md).

- ci, triage: `dlconform fuzz-ci`, rounds of the libFuzzer build with triage, minimisation,
  reproducers, a summary and records in results.json.
- repro: `dlconform fuzz-repro`, the reproducer script of one fuzz input.
- record, exchange, consumer_oracles: the consumer target in Python, which consumer
  reproducers run; producer_views, producer_oracles: the same for the producer target
  (the C target imports producer_views); breaches: what both report.
- throughput, time_to_bug: the benchmarks (`python3 -m dlconform.fuzz.throughput`, ...).
"""
