"""Every check of issue 12 item 5 (coverage where bugs hide) is seen failing: each (test,
clause) pair it marks is non-pass under a named built-in fault of ref or pyref, and ref and
pyref pass it (test_meta.py and test_pyref.py run the whole suite clean).

One run per fault, over the test functions of its pairs; a pair passes when some record of
its test (any parametrised case) on its clause is not pass, unsupported or skip.
"""

import fault_repros

#: "fault spec | suite file | test function | clause it must make non-pass", one a line (a
#: backslash at the end of a line here joins it to the next)
TABLE = """
ref:fault=xapi_header_major | test_exchange_api.py | test_table_header_major | XAPI-06
ref:fault=destructor_dies_at_exit | test_ownership.py | test_exports_alive_at_interpreter_exit | CAP-05
ref:fault=deleter_dies_at_exit | test_ownership.py | test_exports_alive_at_interpreter_exit | OWN-04
ref:fault=consumer_release_dies_at_exit | test_ownership.py | test_imports_alive_at_interpreter_exit | OWN-03
ref:fault=consumer_reads_major2 | test_refusals.py | test_consumer_refusal_and_deleter | VER-08
ref:fault=consumer_reads_major2 | test_fuzz_seeds.py | test_consumer_shared_fuzz_seed | VER-08
ref:fault=consumer_xapi_trusts_handout | test_refusals.py | test_consumer_refusal_and_deleter | VER-08
pyref:fault=consumer_releases_used | test_refusals.py | test_consumer_refuses_used_capsule_on_every_route | OWN-03
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_refusal_and_deleter | VER-09
pyref:fault=consumer_accepts_overflow | test_refusals.py | test_consumer_refusal_and_deleter | LAY-10
ref:fault=consumer_accepts_negative_shape | test_refusals.py | test_consumer_refusal_and_deleter | LAY-09
ref:fault=consumer_accepts_negative_shape | test_fuzz_seeds.py | test_consumer_shared_fuzz_seed | LAY-09
pyref:fault=consumer_accepts_null_data | test_refusals.py | test_consumer_refusal_and_deleter | LAY-04
ref:fault=consumer_ignores_strides | test_refusals.py | test_consumer_refusal_and_deleter | LAY-11
ref:fault=consumer_ignores_strides | test_fuzz_seeds.py | test_consumer_shared_fuzz_seed | LAY-11
ref:fault=consumer_foreign_device_typeerror | test_refusals.py | test_consumer_device_refusals_and_deleter | DEV-07
ref:fault=consumer_foreign_device_typeerror | test_fuzz_seeds.py | test_consumer_shared_fuzz_seed | DEV-07
ref:fault=consumer_renames_late | test_refusals.py | test_consumer_refusal_and_deleter | OWN-03
ref:fault=consumer_renames_late | test_refusals.py | test_consumer_dtype_refusals_and_deleter | OWN-03
ref:fault=consumer_renames_late | test_refusals.py | test_consumer_ruled_dtype_refusals_and_deleter | OWN-03
ref:fault=consumer_renames_late | test_refusals.py | test_consumer_malformed_dtype_refusals_and_deleter | OWN-03
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_ruled_dtype_refusals_and_deleter | VER-09
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_ruled_dtype_refusals_and_deleter | DT-07
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_ruled_dtype_refusals_and_deleter | DT-08
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_malformed_dtype_refusals_and_deleter | DT-03
ref:fault=consumer_accepts_unknown_dtype | test_refusals.py | test_consumer_malformed_dtype_refusals_and_deleter | DT-13
ref:fault=consumer_renames_late | test_refusals.py | test_consumer_device_refusals_and_deleter | OWN-03
ref:fault=consumer_accepts_used | test_refusals.py | test_consumer_refuses_used_capsule_on_every_route | CAP-04
ref:fault=consumer_accepts_used | test_fuzz_seeds.py | test_consumer_shared_fuzz_seed | CAP-04
ref:fault=consumer_no_rename | test_refusals.py | test_consumer_plain_import_on_every_route | CAP-03
ref:fault=consumer_double_delete | test_refusals.py | test_consumer_plain_import_on_every_route | OWN-03
ref:fault=consumer_copies_always | test_refusals.py | test_consumer_plain_import_on_every_route | SEM-01
ref:fault=stream_versioned_accepted | test_keywords.py | \
test_producer_refuses_bad_keywords_in_every_combination | STR-10
pyref:fault=dl_device_unchecked_on_copy | test_keywords.py | \
test_producer_refuses_bad_keywords_in_every_combination | DEV-05
pyref:fault=dl_device_unchecked_on_copy | test_keywords.py | \
test_producer_refuses_devices_it_cannot_serve_in_every_combination | DEV-05
ref:fault=ignore_max_version | test_keywords.py | test_producer_honours_every_valid_keyword_combination | VER-02
ref:fault=version_wrong | test_keywords.py | test_producer_honours_every_valid_keyword_combination | VER-03
ref:fault=old_major_versioned | test_keywords.py | test_producer_honours_every_valid_keyword_combination | VER-04
ref:fault=device_mismatch | test_keywords.py | test_producer_honours_every_valid_keyword_combination | DEV-04
ref:fault=dl_device_cpu_refused | test_keywords.py | test_producer_honours_every_valid_keyword_combination | DEV-06
ref:fault=copy_ignored | test_keywords.py | test_producer_honours_every_valid_keyword_combination | CPY-01
ref:fault=copy_false_copies | test_keywords.py | test_producer_honours_every_valid_keyword_combination | CPY-02
pyref:fault=copy_none_versioned_copies | test_keywords.py | \
test_producer_honours_every_valid_keyword_combination | CPY-03
ref:fault=copy_unflagged | test_keywords.py | test_producer_honours_every_valid_keyword_combination | FLG-04
ref:fault=legacy_capsule_name | test_fields.py | test_producer_fields_on_every_path | CAP-01
ref:fault=versioned_capsule_name | test_fields.py | test_producer_fields_on_every_path | CAP-02
ref:fault=xapi_handout_version | test_fields.py | test_producer_fields_on_every_path | VER-07
ref:fault=undefined_flag | test_fields.py | test_producer_fields_on_every_path | FLG-01
ref:fault=device_mismatch | test_fields.py | test_producer_fields_on_every_path | DEV-03
ref:fault=byte_strides | test_fields.py | test_producer_fields_on_every_path | LAY-05
ref:fault=null_strides | test_fields.py | test_producer_fields_on_every_path | LAY-06
ref:fault=version_wrong | test_fields.py | test_exchange_table_header_version | VER-07
pyref:fault=bfloat16_typeerror | test_dtype.py | test_producer_every_discovered_dtype | ERR-01
pyref:fault=reexport_drops_readonly | test_flags.py | test_readonly_every_way_exported_flagged | FLG-02
ref:fault=consumer_foreign_stream | test_stream.py | test_consumer_stream_for_other_stream_devices | STR-15
ref:fault=consumer_cpu_request_stream | test_stream.py | test_consumer_stream_for_other_stream_devices | STR-12
ref:fault=consumer_no_retry | test_versioning.py | test_consumer_retries_for_every_keyword | VER-06
"""


def _caught():
    """fault spec -> [(file, test function, clause)] it must make non-pass (TABLE)."""
    out = {}
    for line in TABLE.strip().splitlines():
        spec, *pair = (cell.strip() for cell in line.split("|"))
        out.setdefault(spec, []).append(tuple(pair))
    return out


CAUGHT = _caught()


def test_every_coverage_check_fails_under_its_fault(tmp_path):
    """Each fault runs the test functions of its pairs (every case of each), as `dlconform run`
    would (fault_repros.run_specs: the faults of a library share its warm parent)."""
    items = {spec: (spec, None, tuple(sorted({"%s::%s" % (f, t) for f, t, _ in pairs})))
             for spec, pairs in CAUGHT.items()}
    runs = fault_repros.run_specs(tmp_path, sorted(items.values()))
    missed = []
    for spec, pairs in sorted(CAUGHT.items()):
        found = {(r["test"].split("::")[0], r["test"].split("::")[1].split("[")[0], r["clause"])
                 for r in runs[items[spec]].records if r["verdict"] not in ("pass", "unsupported", "skip")}
        missed += [(spec, p) for p in pairs if p not in found]
    assert not missed, "checks not seen failing under their fault:\n" + "\n".join(
        "  %s: %s::%s on %s" % (spec, *p) for spec, p in missed)


def test_every_marked_clause_of_the_coverage_checks_has_a_fault():
    """Each (test, clause) pair the coverage checks mark is in CAUGHT."""
    files = sorted({f for pairs in CAUGHT.values() for f, _, _ in pairs})
    marked = {(*test.split("::"), c) for test, clauses in fault_repros.marked_clauses(files).items() for c in clauses}
    covered = {p for pairs in CAUGHT.values() for p in pairs}
    tests = {(f, t) for f, t, _ in covered}
    missing = sorted(p for p in marked if (p[0], p[1]) in tests and p not in covered)
    assert not missing, "marked pairs of the coverage checks with no fault in CAUGHT: %s" % missing
