#!/bin/bash
# info on raw images agrees with qemu-img info, in JSON and human form.
. "$(dirname "$0")/lib.sh"
need qemu-img
gen -s 3 -m 64K -M 1M 10M "$T/a.raw"
"$DISKIMG" info --output=json "$T/a.raw" > "$T/ours.json" || fail "info failed"
qemu-img info --output=json "$T/a.raw" > "$T/theirs.json"
for key in virtual-size filename format actual-size dirty-flag; do
    o=$(grep "\"$key\"" "$T/ours.json"); q=$(grep "\"$key\"" "$T/theirs.json")
    [ "${o%,}" = "${q%,}" ] || fail "$key: ours '$o', qemu-img '$q'"
done
"$DISKIMG" info "$T/a.raw" > "$T/ours.txt" || fail "info failed"
qemu-img info "$T/a.raw" > "$T/theirs.txt"
diff "$T/ours.txt" "$T/theirs.txt" || fail "human output differs from qemu-img"
truncate -s 1500M "$T/b.raw"
"$DISKIMG" info "$T/b.raw" | grep -qx "virtual size: 1.46 GiB (1572864000 bytes)" || fail "human size"
expect_error "no such file" "$DISKIMG" info "$T/none.raw"
exit 0
