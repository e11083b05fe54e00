# Helpers for the fault-injection scenarios (sourced after tests/lib.sh).
#   fault_counts SRC DSTFMT [ARGS...]  sets R W S: the reads, writes and
#                                      syncs one clean conversion makes
#   must_fail TAG RE ENV... -- CMD...  CMD under ENV exits 1, stderr
#                                      matches RE, no signal, no sanitizer
#   unchanged                          inputs still match $T/inputs.sha1
#   empty_dir DIR TAG                  nothing left in DIR (no target, no
#                                      temporary file)
#   same_content SRC OUT               qemu-img compare says identical
need qemu-img

fault_counts() {
    local src=$1 fmt=$2 out; shift 2
    out=$T/count.$fmt
    rm -f "$out" "$T/stats"
    DISKIMG_FAULT_STATS=$T/stats "$DISKIMG" convert -O "$fmt" "$@" "$src" "$out" 2>"$T/err" ||
        { cat "$T/err" >&2; fail "clean conversion of $src to $fmt failed"; }
    same_content "$src" "$out"
    rm -f "$out"
    read -r _ R _ W _ S _ < "$T/stats" || fail "no fault statistics written"
    [ "$R" -gt 0 ] && [ "$W" -gt 0 ] && [ "$S" -gt 0 ] || fail "odd counts: $(cat "$T/stats")"
}

must_fail() {
    local tag=$1 re=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local rc=0
    env "${envs[@]}" timeout -s KILL 60 "$@" >"$T/stdout" 2>"$T/err" || rc=$?
    [ $rc -eq 1 ] || { cat "$T/err" >&2; fail "$tag: expected exit 1, got $rc (${envs[*]})"; }
    grep -Eq -- "$re" "$T/err" || { cat "$T/err" >&2; fail "$tag: stderr does not match '$re' (${envs[*]})"; }
    grep -q "AddressSanitizer\|runtime error\|LeakSanitizer" "$T/err" &&
        { cat "$T/err" >&2; fail "$tag: sanitizer report"; }
    [ "$(wc -l < "$T/err")" -le 2 ] || { cat "$T/err" >&2; fail "$tag: more than one error message"; }
    return 0
}

checksum_inputs() { (cd "$T/in" && sha1sum -- *) > "$T/inputs.sha1"; }
unchanged() { (cd "$T/in" && sha1sum -c --quiet "$T/inputs.sha1") >&2 || fail "$1: an input changed"; }

empty_dir() {
    if ls -A "$1" | grep -q .; then fail "$2: left behind in $1: $(ls -A "$1")"; fi
    return 0
}

same_content() {
    qemu-img compare -q "$1" "$2" || fail "$2 differs from $1"
}
