"""The Python half of the fuzz targets in fuzz/ (fuzz/README.md).

- ci: `dlconform fuzz-ci`, rounds of the libFuzzer build with triage, minimisation,
  reproducers, a summary and records in results.json.
- repro: `dlconform fuzz-repro`, a Python reproducer of one fuzz input.
- producer_views: the native views the producer target (fuzz/target_producer.c) exports.
- throughput, time_to_bug: the benchmarks (`python3 -m dlconform.fuzz.throughput`, ...).
"""
