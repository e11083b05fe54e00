# Helpers for the qcow2 reader tests (sourced after tests/lib.sh).
#   readback IMG [CONVERT-ARGS...]   diskimg's raw conversion of IMG must be
#                                    byte-identical to qemu-img's
#   poke FILE OFFSET HEX             overwrite bytes (HEX like "00ff10")
#   be32 N / be64 N                  N as big-endian hex
#   peek64 FILE OFFSET               8 bytes at OFFSET as a decimal number
#   hdr_field NAME                   byte offset of a header field
#   bdmap IMG                        the extents line of `bdread -m`
need qemu-img
need qemu-io
BDREAD=$BUILD/tools/bdread
[ -x "$BDREAD" ] || fail "missing $BDREAD (make unit)"

readback() {
    local img=$1; shift
    local base; base=$T/rb.$$.$RANDOM
    rm -f "$base.mine" "$base.ref"
    "$DISKIMG" convert -O raw "$@" "$img" "$base.mine" 2>"$base.err" ||
        { cat "$base.err" >&2; fail "diskimg convert $* $img failed"; }
    grep -q "AddressSanitizer\|runtime error" "$base.err" && { cat "$base.err" >&2; fail "sanitizer: $img"; }
    qemu-img convert -O raw "$@" "$img" "$base.ref" || fail "qemu-img convert $* $img failed"
    cmp "$base.mine" "$base.ref" || fail "$img ($*): content differs from qemu-img's reading"
    rm -f "$base.mine" "$base.ref" "$base.err"
}

poke() {
    local file=$1 off=$2 hex=$3 esc=""
    while [ -n "$hex" ]; do esc="$esc\\x${hex:0:2}"; hex=${hex:2}; done
    printf "$esc" | dd of="$file" bs=1 seek="$off" conv=notrunc status=none ||
        fail "poke $file $off"
}

be32() { printf '%08x' "$1"; }
be64() { printf '%016x' "$1"; }

peek64() {
    local hex; hex=$(od -A n -t x1 -j "$2" -N 8 "$1" | tr -d ' \n')
    echo $((16#$hex))
}
peek32() {
    local hex; hex=$(od -A n -t x1 -j "$2" -N 4 "$1" | tr -d ' \n')
    echo $((16#$hex))
}

bdmap() { "$BDREAD" "$@" -m | tail -n 1; }

# ext_end IMG: offset of the end-of-extensions marker of a v3 image
ext_end() {
    local off; off=$(peek32 "$1" 100)     # header_length
    while :; do
        local type len
        type=$(peek32 "$1" "$off"); len=$(peek32 "$1" $((off + 4)))
        [ "$type" = 0 ] && { echo "$off"; return; }
        off=$((off + 8 + (len + 7) / 8 * 8))
        [ "$off" -lt 65536 ] || fail "no end of header extensions in $1"
    done
}
