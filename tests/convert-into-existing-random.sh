#!/bin/bash
# convert -n -O qcow2 against qemu-img's own -n over 40 seeded random
# targets and sources (tests/tools/inplace_diff.py says what varies).
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3
python3 "$TOP/tests/tools/inplace_diff.py" "$DISKIMG" "$TOP/build/tools/genimg" "$T" 7 40 ||
    fail "convert -n differs from qemu-img's on random targets"
