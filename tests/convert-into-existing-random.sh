#!/bin/bash
# convert -n -O qcow2 against qemu-img's own -n over 40 seeded random
# targets and sources (tests/tools/inplace_diff.py says what varies).
# The ASan build runs those 40 (seed 7); the plain build, which asserts the
# same without the memory checks, runs 20 others (seed 8): every case the
# suite ran before still runs, under ASan, and 20 more run besides.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
seed=8 count=20
asan_build && seed=7 count=40
python3 "$TOP/tests/tools/inplace_diff.py" "$DISKIMG" "$TOP/build/tools/genimg" "$T" $seed $count ||
    fail "convert -n differs from qemu-img's on random targets"
