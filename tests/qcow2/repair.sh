# same_repair for the check -r tests (sourced after tests/qcow2/helpers.sh):
#   same_repair IMG MODE [ORIG]   diskimg check -r MODE and qemu-img check -r
#                                 MODE on copies of IMG (mine.qcow2, ref.qcow2)
#                                 agree; with ORIG, the result reads like it
# same_repair IMG MODE [ORIG]: both tools repair copies of IMG alike (exit
# status, JSON, problem lines; with HUMAN=1 also the text summary); the
# result checks like qemu's; with ORIG, it reads like ORIG
HUMAN=0
same_repair() {
    local img=$1 mode=$2 orig=${3:-} rc=0 qrc=0
    cp "$img" mine.qcow2; cp "$img" ref.qcow2
    "$DISKIMG" check -r "$mode" --output=json mine.qcow2 > mine.json 2> mine.err || rc=$?
    qemu-img check -r "$mode" --output=json ref.qcow2 > ref.json 2> ref.err || qrc=$?
    grep -q "AddressSanitizer\|runtime error" mine.err && { cat mine.err; fail "sanitizer: $img"; }
    [ $rc = $qrc ] || { cat mine.err ref.err; fail "$img -r $mode: exit $rc, qemu-img $qrc"; }
    sed -i 's/"mine.qcow2"/"X"/' mine.json; sed -i 's/"ref.qcow2"/"X"/' ref.json
    cmp -s mine.json ref.json || { diff mine.json ref.json; fail "$img -r $mode: JSON differs"; }
    sort -u mine.err | grep -v '^diskimg: ' > mine.lines
    sort -u ref.err | grep -v '^qemu-img: ' > ref.lines
    cmp -s mine.lines ref.lines || { diff mine.lines ref.lines; fail "$img -r $mode: problem lines differ"; }
    if [ $HUMAN = 1 ]; then
        cp "$img" mine-h.qcow2; cp "$img" ref-h.qcow2
        "$DISKIMG" check -r "$mode" mine-h.qcow2 > mine.txt 2>/dev/null
        qemu-img check -r "$mode" ref-h.qcow2 > ref.txt 2>/dev/null
        cmp -s mine.txt ref.txt || { diff mine.txt ref.txt; fail "$img -r $mode: summary differs"; }
    fi
    # qemu-img's exit status is that of its check of the repaired image
    if [ $qrc != 1 ]; then
        rc=0; qemu-img check mine.qcow2 > /dev/null 2>&1 || rc=$?
        [ $rc = $qrc ] || fail "$img -r $mode: qemu-img check of the result exits $rc, not $qrc"
    fi
    if [ -n "$orig" ] && [ $qrc = 0 ]; then
        qemu-img compare -q "$orig" mine.qcow2 || fail "$img -r $mode: content changed"
    fi
    return 0
}
