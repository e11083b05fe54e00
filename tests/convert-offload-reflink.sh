#!/bin/bash
# copy offload on loop-mounted XFS (reflink=1) and btrfs: raw -> raw,
# qcow2 -> raw, raw -> qcow2, qcow2 -> qcow2, a vmdk flat source, raw ->
# fixed VHD, and -n
# into raw and qcow2 targets.  Each output is identical to its source
# (qemu-img compare; qemu-img check clean for qcow2), its data extents are
# really shared with the source (FIEMAP's shared flag, -v's count), and it
# is as sparse as the same conversion with --copy-offload=off (written zeros
# of the source became holes: allocated blocks within +5%).
. "$(dirname "$0")/lib.sh"
need qemu-img
need filefrag
cd "$T" || exit 1

# allocated bytes of an image (a vmdk with its extents)
alloc_all() { local t=0 f; for f in "$@"; do t=$((t + $(alloc "$f"))); done; echo $t; }

# one conversion with offload (auto) and the same with it off:
# case NAME SRC... -- diskimg convert ARGS ending in the output name
case_() {
    local name=$1 out=$2 fmt=$3; shift 3
    rm -f "$out" "off-$out"
    "$DISKIMG" convert -v "$@" "$out" 2>"$name.err" || { cat "$name.err" >&2; fail "$fs $name: convert"; }
    "$DISKIMG" convert --copy-offload=off "$@" "off-$out" 2>"$name.off.err" || { df -h . >&2; ls -ls >&2; }; [ -s "off-$out" ] ||
        { cat "$name.off.err" >&2; fail "$fs $name: convert --copy-offload=off"; }
    local shared; shared=$(offload_bytes 1 "$name.err")
    [ -n "$shared" ] && [ "$shared" -gt 0 ] || { cat "$name.err" >&2; fail "$fs $name: nothing shared"; }
    [ "$(shared_extents "$out")" -gt 0 ] || { filefrag -v "$out" >&2; fail "$fs $name: FIEMAP shows no shared extent"; }
    # (qemu-img probes a fixed VHD as raw: its format is given)
    local F=(); [ "$fmt" = vpc ] && F=(-F vpc)
    qemu-img compare -q "${F[@]}" "$src_ref" "$out" || fail "$fs $name: output differs from the source"
    [ "$fmt" = vpc ] && F=(-f vpc -F vpc)
    qemu-img compare -q "${F[@]}" "off-$out" "$out" || fail "$fs $name: output differs from --copy-offload=off"
    if [ "$fmt" = qcow2 ]; then
        qemu-img check -q "$out" || fail "$fs $name: qemu-img check"
    fi
    local a b
    a=$(alloc "$out"); b=$(alloc "off-$out")
    [ "$a" -le $((b + b / 20)) ] || fail "$fs $name: $a bytes allocated, $b without offload"
    echo "$fs $name: shared $shared, allocated $a (without offload $b)"
}

for fs in xfs btrfs; do
    mnt=$T/mnt-$fs
    loop_fs "$fs" "$mnt"
    cd "$mnt" || exit 1
    # random and text data, written zeros, holes; 512-aligned runs
    gen -s 7 -a 80 -M 1M 16M src.raw
    src_ref=src.raw
    # qcow2 with the written zeros stored as data clusters (-S 0), and a
    # vmdk flat extent with the same bytes
    qemu-img convert -q -S 0 -f raw -O qcow2 src.raw src.qcow2
    qemu-img convert -q -f raw -O vmdk -o subformat=monolithicFlat src.raw src.vmdk
    [ -f src-flat.vmdk ] || fail "no flat extent"

    case_ raw-raw o.raw raw -f raw -O raw src.raw
    case_ qcow2-raw q.raw raw -O raw src.qcow2
    case_ raw-qcow2 r.qcow2 qcow2 -f raw -O qcow2 src.raw
    case_ qcow2-qcow2 q.qcow2 qcow2 -O qcow2 src.qcow2
    case_ vmdkflat-raw v.raw raw -O raw src.vmdk
    # a fixed VHD is its disk's bytes and a footer: shared like raw
    case_ raw-vhdfixed f.vhd vpc -f raw -O vpc -o subformat=fixed,force_size=on src.raw
    # the written zeros were holes in the output, not shared zeros
    a=$(alloc o.raw); s=$(alloc src.raw)
    [ "$a" -lt "$s" ] || fail "$fs: raw output ($a) not sparser than the source ($s) with its written zeros"

    # into raw, adjacent ranges are gathered into one clone call across
    # jobs: out of order (-W), cut short by the fault injector (the rest of
    # a gathered range resumed), and a failing clone inside one (the run
    # fails, nothing left behind)
    ok "$DISKIMG" convert -W -f raw -O raw src.raw w.raw
    cmp src.raw w.raw || fail "$fs -W raw: differs"
    ok env DISKIMG_FAULT=write:1+:short "$DISKIMG" convert -f raw -O raw src.raw s.raw
    cmp src.raw s.raw || fail "$fs short clones: differs"
    for k in 1 2 3; do
        expect_error "write failed" env DISKIMG_FAULT=write:$k:EIO "$DISKIMG" convert -f raw -O raw src.raw e.raw
        [ ! -e e.raw ] || fail "$fs: e.raw left after a failed clone ($k)"
        ls -A | grep -q '^\.\?e\.raw' && fail "$fs: a temporary output left after a failed clone ($k)"
    done

    # -n into an existing raw and an existing qcow2 target
    head -c 16M /dev/urandom > n.raw
    "$DISKIMG" convert -v -n -f raw -O raw src.raw n.raw 2>n.err || { cat n.err >&2; fail "$fs -n raw"; }
    [ "$(offload_bytes 1 n.err)" -gt 0 ] || { cat n.err >&2; fail "$fs -n raw: nothing shared"; }
    cmp src.raw n.raw || fail "$fs -n raw: differs"
    qemu-img create -q -f qcow2 n.qcow2 16M
    qemu-io -c 'write -P 0x55 0 16M' n.qcow2 >/dev/null
    "$DISKIMG" convert -v -n -f raw -O qcow2 src.raw n.qcow2 2>nq.err || { cat nq.err >&2; fail "$fs -n qcow2"; }
    [ "$(offload_bytes 1 nq.err)" -gt 0 ] || { cat nq.err >&2; fail "$fs -n qcow2: nothing shared"; }
    qemu-img compare -q src.raw n.qcow2 || fail "$fs -n qcow2: differs"
    qemu-img check -q n.qcow2 || fail "$fs -n qcow2: qemu-img check"

    # -C (qemu-img's: offload required) works here
    ok "$DISKIMG" convert -C -f raw -O raw src.raw c.raw
    cmp src.raw c.raw || fail "$fs -C: differs"
    cd "$T" || exit 1
    loop_fs_cleanup
done
exit 0
