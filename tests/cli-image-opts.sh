#!/bin/bash
# qemu-img's shared options on every command that takes them in 7.2:
# --image-opts (an image named by "driver=qcow2,file.filename=X") does what
# the plain name does, and prints what qemu-img prints with the same
# arguments; --object is checked as qemu-img checks it (the same exit
# status and message for a definition it refuses) and a good one accepted;
# -t/-T cache modes accepted and refused like qemu-img's.
. "$(dirname "$0")/lib.sh"
need qemu-img
need qemu-io
need python3

cd "$T" || fail "cd $T"
mkdir chain
qemu-img create -q -f qcow2 chain/base.qcow2 2M
qemu-io -f qcow2 -c "write -P 0x61 0 64k" -c "write -P 0x62 1M 4k" chain/base.qcow2 >/dev/null
qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 chain/top.qcow2
qemu-io -f qcow2 -c "write -P 0x71 32k 64k" -c "write -z 1M 4k" chain/top.qcow2 >/dev/null
qemu-img create -q -f qcow2 other.qcow2 2M
qemu-io -f qcow2 -c "write -P 0x71 32k 64k" other.qcow2 >/dev/null
cp chain/base.qcow2 a.qcow2
opts() { echo "driver=qcow2,file.filename=$1"; }

# same ARGS...: qemu-img and diskimg with ARGS, in $T: the same exit status,
# stdout and stderr (each program's name taken off its messages)
same() {
    local qrc=0 drc=0 qe de
    qemu-img "$@" >q.out 2>q.err || qrc=$?
    "$DISKIMG" "$@" >d.out 2>d.err || drc=$?
    qe=$(<q.err) de=$(<d.err)
    [[ $de == *AddressSanitizer* || $de == *"runtime error"* ]] && { echo "$de"; fail "sanitizer: $*"; }
    [ $qrc = $drc ] || { echo "$qe"; echo "$de"; fail "$*: exit $drc, qemu-img $qrc"; }
    qe=${qe#qemu-img: } de=${de#diskimg: }
    qe=${qe//$'\n'qemu-img: /$'\n'} de=${de//$'\n'diskimg: /$'\n'}
    [ "$qe" = "$de" ] || { diff <(echo "$qe") <(echo "$de"); fail "$*: messages differ from qemu-img's"; }
    cmp -s q.out d.out || { diff q.out d.out; fail "$*: output differs from qemu-img's"; }
}

# same_status ARGS...: the same exit status only (usage messages differ)
same_status() {
    local qrc=0 drc=0
    qemu-img "$@" >/dev/null 2>q.err || qrc=$?
    "$DISKIMG" "$@" >/dev/null 2>d.err || drc=$?
    grep -q "AddressSanitizer\|runtime error" d.err && { cat d.err; fail "sanitizer: $*"; }
    [ $qrc = $drc ] || { cat q.err d.err; fail "$*: exit $drc, qemu-img $qrc"; }
}

# json_same A B WHAT: A and B must hold the same JSON (key order, the
# file's allocated size and snapshot dates aside); checked all at once at
# the end (one python run)
json_same() { echo "$1 $2 $3" >> json-pairs; }
json_check() {
    python3 - json-pairs <<'PY' || fail "JSON differs"
import json, sys
def norm(x):
    x.pop("actual-size", None)
    for s in x.get("snapshots", []):
        s.pop("date-sec", None); s.pop("date-nsec", None)
    return x
bad = 0
for line in open(sys.argv[1]):
    a, b, what = line.rstrip("\n").split(" ", 2)
    ja, jb = (norm(json.load(open(f))) for f in (a, b))
    if ja != jb:
        print("%s: %s and %s differ:\n%s\n%s" % (what, a, b, ja, jb)); bad = 1
sys.exit(bad)
PY
}

# --- the read-only commands: the string gives qemu-img's output and the
# plain name's
S=$(opts chain/top.qcow2)
same info --image-opts "$S"
# (--backing-chain: diskimg names the backing file by its full path where
# qemu-img joins it to the top's name; the string gives the plain name's)
"$DISKIMG" info --backing-chain chain/top.qcow2 > d2.out || fail "info --backing-chain"
"$DISKIMG" info --backing-chain --image-opts "$S" > d1.out || fail "info --backing-chain --image-opts"
cmp -s d1.out d2.out || fail "info --backing-chain: --image-opts and the plain name differ"
same check --image-opts "$S"
same check --output=json --image-opts "$S"
same map --image-opts "$S"
same map --output=json --image-opts "$S"
same measure -O qcow2 --image-opts "$S"
same snapshot -l --image-opts "$S"
same compare --image-opts "$S" "$(opts other.qcow2)"
same compare -s --image-opts "$S" "$(opts other.qcow2)"
same compare --image-opts "$S" "$(opts chain/base.qcow2)"
same compare --image-opts "driver=file,filename=chain/top.qcow2" "$S"
"$DISKIMG" info --output=json --image-opts "$S" > d1.json || fail "info --image-opts"
"$DISKIMG" info --output=json chain/top.qcow2 > d2.json || fail "info"
qemu-img info --output=json --image-opts "$S" > q1.json
json_same d1.json d2.json "info: --image-opts and the plain name"
json_same d1.json q1.json "info --image-opts: diskimg and qemu-img"
"$DISKIMG" map --output=json chain/top.qcow2 > m2.json || fail "map"
"$DISKIMG" map --output=json --image-opts "$S" > m1.json || fail "map --image-opts"
cmp -s m1.json m2.json || fail "map: --image-opts and the plain name differ"
# driver=file: the file's bytes as raw (qemu-img info calls its format
# "file", diskimg "raw")
same compare --image-opts "driver=file,filename=chain/top.qcow2" "driver=raw,file.filename=chain/top.qcow2"
# strings qemu-img refuses, and -f beside --image-opts
same info --image-opts "$S,bogus=1"
same info --image-opts chain/top.qcow2
same info --image-opts "driver=nope,file.filename=a.qcow2"
same check --image-opts -f qcow2 "$S"
same map -f qcow2 --image-opts "$S"
same compare -f qcow2 --image-opts "$S" "$S"
same compare -F qcow2 --image-opts "$S" "$S"
same measure --image-opts --size 1M
same measure -f raw --size 1M

# --- the commands that change the image: the same result through the
# string as through the plain name (and qemu-img check clean)
fresh() { rm -rf q d; mkdir q d; cp chain/*.qcow2 q/; cp chain/*.qcow2 d/; }
# checked CMD ARGS... : diskimg CMD with the plain name in q/, through the
# string in d/ (the image named I); then both images the same to qemu-img
checked() {
    local cmd=$1; shift
    local plain=() str=() a
    for a in "$@"; do
        case $a in
        I) plain+=(q/top.qcow2); str+=(--image-opts "$(opts d/top.qcow2)") ;;
        *) plain+=("$a"); str+=("$a") ;;
        esac
    done
    "$DISKIMG" "$cmd" "${plain[@]}" > p.out 2>p.err || { cat p.err; fail "$cmd ${plain[*]}"; }
    "$DISKIMG" "$cmd" "${str[@]}" > s.out 2>s.err || { cat s.err; fail "$cmd ${str[*]}"; }
    cmp -s p.out s.out || { diff p.out s.out; fail "$cmd: --image-opts prints otherwise"; }
    qemu-img check -q q/top.qcow2 || fail "$cmd: q/top.qcow2 not clean"
    qemu-img check -q d/top.qcow2 || fail "$cmd: d/top.qcow2 not clean"
    qemu-img compare -q q/top.qcow2 d/top.qcow2 || fail "$cmd: the guest views differ"
    local n=$((++checks))
    (cd q && qemu-img info --output=json top.qcow2) > qi$n.json
    (cd d && qemu-img info --output=json top.qcow2) > di$n.json
    json_same qi$n.json di$n.json "$cmd ${str[*]}: the images' headers"
}
checks=0
fresh; checked resize I +1M
fresh; checked resize --shrink I 1M
fresh; checked rebase -u -b "" I
fresh; checked rebase -b "" -t writeback -T none I
qemu-img compare -q chain/top.qcow2 d/top.qcow2 || fail "rebase -b '': the content changed"
fresh; checked commit -t none -d I
fresh; checked amend -o lazy_refcounts=on -t unsafe I
qemu-img info d/top.qcow2 | grep -q "lazy refcounts: true" || fail "amend --image-opts: no change"
fresh; checked snapshot -c snap1 I
qemu-img snapshot -l d/top.qcow2 | grep -q " snap1 " || fail "snapshot -c --image-opts: none"
fresh; checked bitmap --add I bm0
qemu-img info d/top.qcow2 | grep -q "name: bm0" || fail "bitmap --add --image-opts: none"
# commit empties the top into its base
fresh
"$DISKIMG" commit --image-opts "$(opts d/top.qcow2)" > /dev/null || fail "commit --image-opts"
qemu-img compare -q chain/top.qcow2 d/base.qcow2 || fail "commit --image-opts: base differs"

# --- convert: sources as strings; -n into a target named by a string
"$DISKIMG" convert -O raw --image-opts "$(opts chain/top.qcow2)" "$(opts other.qcow2)" d.raw ||
    fail "convert --image-opts"
qemu-img convert -O raw --image-opts "$(opts chain/top.qcow2)" "$(opts other.qcow2)" q.raw
cmp q.raw d.raw || fail "convert --image-opts: output differs from qemu-img's"
same convert --image-opts -f qcow2 "$S" x.raw
same convert --target-image-opts chain/top.qcow2 "$(opts x.qcow2)"
[ -e x.raw ] || [ -e x.qcow2 ] && fail "a refused convert left an output"
for tgt in "driver=qcow2,file.filename=t.qcow2" "file.filename=t.qcow2"; do
    qemu-img create -q -f qcow2 t.qcow2 2M
    "$DISKIMG" convert -n --target-image-opts chain/top.qcow2 "$tgt" || fail "convert -n --target-image-opts $tgt"
    qemu-img check -q t.qcow2 || fail "convert -n $tgt: not clean"
    qemu-img compare -q -f qcow2 -F qcow2 chain/top.qcow2 t.qcow2 || fail "convert -n $tgt: differs"
done
truncate -s 2M t.raw
"$DISKIMG" convert -n -t off --target-image-opts chain/top.qcow2 "driver=file,filename=t.raw" ||
    fail "convert -n to driver=file"
qemu-img compare -q -F raw chain/top.qcow2 t.raw || fail "convert -n to driver=file: differs"

# --- --object: a good definition is accepted by every command that takes it
OBJ=secret,id=sec0,data=x
ok "$DISKIMG" info --object $OBJ a.qcow2
ok "$DISKIMG" check --object $OBJ -q a.qcow2
ok "$DISKIMG" map --object $OBJ a.qcow2
ok "$DISKIMG" measure --object $OBJ -O qcow2 a.qcow2
ok "$DISKIMG" snapshot --object $OBJ -l a.qcow2
ok "$DISKIMG" compare --object $OBJ -q a.qcow2 a.qcow2
ok "$DISKIMG" resize --object $OBJ -q a.qcow2 +64k
ok "$DISKIMG" amend --object $OBJ -o lazy_refcounts=off a.qcow2
ok "$DISKIMG" bitmap --object $OBJ --add a.qcow2 b0
ok "$DISKIMG" create --object $OBJ -q -f qcow2 c.qcow2 1M
ok "$DISKIMG" convert --object $OBJ a.qcow2 c.raw
ok "$DISKIMG" dd --object $OBJ if=a.qcow2 of=dd.raw
ok "$DISKIMG" rebase --object $OBJ -u -b "" a.qcow2
ok "$DISKIMG" commit --object $OBJ -q chain/top.qcow2
ok "$DISKIMG" info --object $OBJ --object "secret,id=sec1,file=c.raw" --object tls-creds-anon,id=t0 \
    --object "qom-type=secret,id=sec2,data=y,keyid=sec0" a.qcow2
qemu-img check -q a.qcow2 || fail "a.qcow2 not clean"
# a qcow2 image's secret in the string: nothing for an image that is not
# encrypted; one that is is refused, secret or not
ok "$DISKIMG" info --object $OBJ --image-opts "$(opts a.qcow2),encrypt.key-secret=sec0"
# (crypt_method 1, AES, in the header: qemu-img's LUKS setup takes seconds)
qemu-img create -q -f qcow2 enc.qcow2 1M
printf '\0\0\0\1' | dd of=enc.qcow2 bs=1 seek=32 conv=notrunc status=none
expect_error "enc.qcow2: encrypted images are not supported" \
    "$DISKIMG" convert --object $OBJ --image-opts "$(opts enc.qcow2),encrypt.key-secret=sec0" x.raw
# ... and a bad one refused as qemu-img refuses it, before anything else
for o in "" , secret "secret,id=s" "id=s,data=x" "foo,id=x" "iothread,id=x" "secret,id=0s,data=x" \
         "secret,id=s,data=x,bogus=1" "secret,id=s,data" "secret,id=s,data=x,file=c.raw" \
         "secret,id=s,file=no/such" "secret,id=s,data=x,format=hex" "secret,id=s,da ta=x" \
         "secret,id=s,data=x,keyid=nope" "secret,id=s,data=x,loaded=on"; do
    same info --object "$o" a.qcow2
done
same info --object $OBJ --object secret,id=sec0,data=y a.qcow2
same info --object help a.qcow2
same info --object secret,help a.qcow2
for c in "check a.qcow2" "map a.qcow2" "measure a.qcow2" "snapshot -l a.qcow2" \
         "compare a.qcow2 a.qcow2" "resize a.qcow2 1M" "rebase -u -b '' a.qcow2" "commit a.qcow2" \
         "amend -o lazy_refcounts=on a.qcow2" "bitmap --add a.qcow2 b1" "create x.qcow2 1M" \
         "convert a.qcow2 x.raw" "dd if=a.qcow2 of=x.raw"; do
    eval "same ${c%% *} --object foo,id=f ${c#* }"
done
[ -e x.qcow2 ] || [ -e x.raw ] && fail "a refused command left an output"

# --- cache modes: where qemu-img lists them, its names (off is none)
qemu-img create -q -f qcow2 c.qcow2 1M
for m in off directsync sometimes; do
    same check -T $m c.qcow2
    same compare -T $m c.qcow2 c.qcow2
    same commit -t $m c.qcow2
    same amend -t $m -o lazy_refcounts=off c.qcow2
    same rebase -t $m -u -b "" c.qcow2
    same rebase -T $m -u -b "" c.qcow2
    same convert -t $m c.qcow2 x.raw
    same convert -T $m c.qcow2 x.raw
    rm -f x.raw
done
# and not where it does not
# (qemu-img measure prints its help and exits 0 for an unknown option)
for c in info map snapshot resize; do
    same_status $c -t none c.qcow2
done
# -U where 7.2 lists it
same info -U c.qcow2
same check -U c.qcow2
same map -U c.qcow2
same measure -U c.qcow2
same snapshot -U -l c.qcow2
same rebase -U -u -b "" c.qcow2
same compare -U c.qcow2 c.qcow2
json_check
exit 0
