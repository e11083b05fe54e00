#!/bin/bash
# A source that shrinks while it is converted with copy offload on (the
# default): the run must fail with a message and leave no output -- not
# die of SIGBUS (which a scan through a mapping of the source would) and
# not write zeros where the lost bytes were.
. "$(dirname "$0")/lib.sh"
cd "$T" || fail "cd"
gen -s 11 -m 1M -M 4M 64M src.raw
cp src.raw keep.raw
# slow every read so that the truncation lands in the middle of the run
DISKIMG_FAULT=read:1+:delay300 $DISKIMG convert -O raw src.raw out.raw 2> err &
pid=$!
sleep 1
truncate -s 1M src.raw
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "exit $rc (want 1): $(cat err)"
grep -q 'src.raw' err || fail "the message does not name the source: $(cat err)"
ls -A | grep -q 'out.raw\|diskimg-' && fail "output left behind: $(ls -A)"
exit 0
