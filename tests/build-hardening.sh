#!/bin/bash
# The binary is built hardened (Makefile, HARDEN=1 by default): a position-
# independent executable, full RELRO (a GNU_RELRO segment and BIND_NOW, so
# the GOT is read-only after start-up), stack protector calls, and -- in
# an optimised build without sanitizers -- _FORTIFY_SOURCE's checked libc
# calls (__memcpy_chk, __snprintf_chk, ...).
. "$(dirname "$0")/lib.sh"
need readelf
b=$DISKIMG
hdr=$(readelf -hW "$b") || fail "readelf cannot read $b"
dyn=$(readelf -dW "$b")
segs=$(readelf -lW "$b")
syms=$(readelf -sW --dyn-syms "$b" | awk '{print $8}')

grep -q 'Type:.*DYN' <<<"$hdr" || fail "not position-independent: $(grep Type: <<<"$hdr")"
grep -Eq 'FLAGS_1.*PIE' <<<"$dyn" || fail "no PIE flag in the dynamic section"
grep -q 'GNU_RELRO' <<<"$segs" || fail "no GNU_RELRO segment (-z relro)"
grep -Eq '\(FLAGS\).*BIND_NOW|FLAGS_1.*NOW' <<<"$dyn" || fail "no BIND_NOW (-z now)"
grep -q '^__stack_chk_fail' <<<"$syms" || fail "no stack protector (__stack_chk_fail)"

if grep -q '__asan_init' <<<"$syms"; then
    echo "sanitizer build: _FORTIFY_SOURCE is off by design"
elif readelf --debug-dump=info "$b" 2>/dev/null | grep -m1 DW_AT_producer | grep -q -- ' -O0'; then
    echo "-O0 build: _FORTIFY_SOURCE needs optimisation"
else
    chk=$(grep -Ec '^__(memcpy|memset|memmove|strcpy|snprintf|vsnprintf|fprintf|printf|read|pread64)_chk' <<<"$syms")
    [ "$chk" -gt 0 ] || fail "no _FORTIFY_SOURCE checked calls (__*_chk) in $b"
fi
echo "hardened: PIE, RELRO, BIND_NOW, stack protector"
