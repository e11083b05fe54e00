#!/bin/bash
# asan: skip (the fuzz targets are their own ASan+UBSan+libFuzzer build)
# Every fuzz target (tests/fuzz/fuzz_*.c, built by make check into
# build-fuzz/) for FUZZ_SMOKE_SECONDS (5 in make check; the
# long runs are tests/fuzz/run.sh) from its seeds (make-seeds.sh:
# every header field value of every format, small-grain VMDKs, streams)
# and its regression inputs (tests/corpus/fuzz/): any crash, sanitizer
# report, broken walker contract (zero extents, the truncation rule),
# timeout or out-of-memory fails the test.  The same as make fuzz-smoke.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
ls "$TOP"/build-fuzz/fuzz/fuzz_* >/dev/null 2>&1 ||
    fail "fuzz targets not built (make check builds them; make fuzz-smoke)"
"$TOP/tests/fuzz/run.sh" --smoke "${FUZZ_SMOKE_SECONDS:-5}" ||
    fail "a fuzz target found something (build-fuzz/smoke-findings/)"
