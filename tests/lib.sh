# Sourced by every tests/*.sh scenario.  Provides:
#   $DISKIMG   the binary under test;  $T  a fresh scratch folder
#   fail MSG / skip MSG / need CMD
#   alloc FILE           allocated bytes (st_blocks * 512)
#   gen ARGS...          the seeded generator (tests/tools/genimg.c)
#   expect_error RE CMD...  CMD must exit 1 with stderr matching RE, no signal
#   qcompare A B         qemu-img compare must say identical
#   vmdk_desc_text FILE  a vmdk descriptor file's text up to its first NUL
set -u
DISKIMG=${DISKIMG:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/diskimg}
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$TOP/build}
T=${TEST_TMP:-$(mktemp -d)}
mkdir -p "$T"
SHARED=$TOP/../shared
export LC_ALL=C

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 not installed"; }
alloc() { echo $(( $(stat -c %b "$1") * 512 )); }
gen() { "$TOP/build/tools/genimg" "$@" || fail "genimg $*"; }

# expect_error REGEX CMD... : exit status 1, stderr matches REGEX
expect_error() {
    local re=$1; shift
    local rc=0
    "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
    [ $rc -eq 1 ] || { cat "$T/stderr" >&2; fail "expected exit 1, got $rc: $*"; }
    grep -Eq -- "$re" "$T/stderr" || { cat "$T/stderr" >&2; fail "stderr does not match '$re': $*"; }
    grep -q "AddressSanitizer\|runtime error" "$T/stderr" && fail "sanitizer report: $*"
    return 0
}

# vmdk_desc_text FILE: a descriptor file's text as readers see it: up to the
# first NUL (qemu-img pads the file to a sector, and what lies in the padding
# is not part of the descriptor), trailing blank lines dropped
vmdk_desc_text() {
    perl -0777 -ne '($t) = split /\0/; $t //= ""; $t =~ s/\n\s*\z/\n/; print $t' "$1"
}

qcompare() {
    qemu-img compare -q "$@" || fail "qemu-img compare says $1 and $2 differ"
}

# ok CMD... : must succeed, stderr shown on failure
ok() {
    "$@" 2>"$T/stderr.ok" || { cat "$T/stderr.ok" >&2; fail "command failed: $*"; }
}
