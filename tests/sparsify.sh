#!/bin/bash
# sparsify punches zero runs in place: content and size unchanged, at least
# as many blocks freed as fallocate --dig-holes frees; --dry-run changes nothing.
. "$(dirname "$0")/lib.sh"
gen -s 21 -m 512 -M 2M $((48 * 1024 * 1024 + 1536)) "$T/src.raw"
cp --sparse=never "$T/src.raw" "$T/dense.raw"
cp --sparse=never "$T/src.raw" "$T/dig.raw"
sync "$T/dense.raw" "$T/dig.raw"
sum=$(sha1sum < "$T/dense.raw")
before=$(alloc "$T/dense.raw")

out=$("$DISKIMG" sparsify --dry-run "$T/dense.raw") || fail "dry run failed"
echo "$out" | grep -Eq "[1-9][0-9]* bytes .* could be freed" || fail "dry run does not report: $out"
[ "$(alloc "$T/dense.raw")" = "$before" ] || fail "--dry-run changed the allocation"
[ "$(sha1sum < "$T/dense.raw")" = "$sum" ] || fail "--dry-run changed the content"

out=$("$DISKIMG" sparsify "$T/dense.raw") || fail "sparsify failed"
echo "$out" | grep -Eq "reclaimed [0-9]+ bytes" || fail "no report: $out"
sync "$T/dense.raw"
after=$(alloc "$T/dense.raw")
[ "$(sha1sum < "$T/dense.raw")" = "$sum" ] || fail "sparsify changed the content"
[ "$(stat -c %s "$T/dense.raw")" = "$(stat -c %s "$T/src.raw")" ] || fail "sparsify changed the size"
[ "$after" -lt "$before" ] || fail "nothing freed"
reported=$(echo "$out" | sed -E 's/.*reclaimed ([0-9]+) bytes.*/\1/')
[ "$reported" = $((before - after)) ] || fail "reported $reported bytes, freed $((before - after))"

if fallocate --help 2>&1 | grep -q dig-holes; then
    fallocate --dig-holes "$T/dig.raw"
    [ "$after" -le "$(alloc "$T/dig.raw")" ] ||
        fail "sparsify left $after bytes allocated, fallocate --dig-holes $(alloc "$T/dig.raw")"
fi
# a second run finds nothing more
out=$("$DISKIMG" sparsify "$T/dense.raw")
echo "$out" | grep -q "reclaimed 0 bytes" || fail "second run: $out"

# -S larger than the zero runs: fewer holes
cp --sparse=never "$T/src.raw" "$T/s64.raw"
ok "$DISKIMG" sparsify -q -S 1M "$T/s64.raw"
[ "$(alloc "$T/s64.raw")" -ge "$after" ] || fail "-S 1M freed more than -S 4K"
cmp "$T/s64.raw" "$T/src.raw" || fail "-S 1M changed the content"

expect_error "only raw" "$DISKIMG" sparsify -f qcow2 "$T/src.raw"
expect_error "no such file" "$DISKIMG" sparsify "$T/missing.raw"
exit 0
