#!/bin/bash
# The tar headers of an OVA as an attacker (or an unusual tar) writes them:
# a pax "size" record overrides the header's size field (tar writes one for
# members of 8 GiB and more); a ustar name of the full 155 + 1 + 100 bytes
# and GNU or pax names of up to 1024 bytes are kept whole, not cut (a cut
# name could match another member); longer ones, a long-name record with
# bytes after its NUL and malformed pax records are refused; an old GNU
# header's time fields are not read as a name prefix; a member stored as a
# GNU sparse file is refused by name.
. "$(dirname "$0")/lib.sh"
need qemu-img
need python3
cd "$T" || fail "cd"

gen -s 95 -m 4K -M 64K 1M src.raw
qemu-img convert -q -f raw -O vmdk -o subformat=streamOptimized src.raw disk.vmdk || fail "qemu-img"

# mk OUT MODE NAME...: for each triple, a tar holding a.ovf and disk.vmdk
# stored as NAME, made by python's tarfile and patched as MODE says
mk() {
    python3 - "$@" <<'PY' || fail "python: $*"
import io, sys, tarfile
def make(out, mode, name):
    fmt = tarfile.GNU_FORMAT if mode.startswith("gnu") else tarfile.PAX_FORMAT
    if mode == "ustar":
        fmt = tarfile.USTAR_FORMAT
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        ovf = tarfile.TarInfo("a.ovf"); data = b"<Envelope/>\n"; ovf.size = len(data)
        t.addfile(ovf, io.BytesIO(data))
        disk = open("disk.vmdk", "rb").read()
        ti = tarfile.TarInfo(name); ti.size = len(disk)
        if mode == "pax-size":
            ti.pax_headers = {"size": str(len(disk))}
        if mode == "pax-sparse":
            ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}
        t.addfile(ti, io.BytesIO(disk))
    b = bytearray(buf.getvalue())

    def headers():
        off = 0
        while off + 512 <= len(b) and any(b[off:off + 512]):
            size = int(b[off + 124:off + 136].rstrip(b"\0 ") or b"0", 8)
            yield off
            off += 512 + (size + 511) // 512 * 512

    def fix(off):
        b[off + 148:off + 156] = b" " * 8
        b[off + 148:off + 156] = b"%06o\0 " % sum(b[off:off + 512])

    last = list(headers())[-1]          # the disk's header
    if mode == "pax-size":
        b[last + 124:last + 136] = b"00000000000\0"   # the pax record holds the size
        fix(last)
    if mode == "pax-bad":
        x = list(headers())[-2]        # the pax header before it
        i = b.index(b" path=", x + 512)
        b[i - 2:i] = b"99"             # its length runs past the records
    if mode == "gnu-times":
        b[last + 345:last + 357] = b"14677151231\0"   # atime: not a prefix
        fix(last)
    if mode == "gnu-nul":
        x = list(headers())[-2]        # the long name record: a NUL inside the name
        b[x + 512 + 10] = 0
    open(out, "wb").write(bytes(b))

args = sys.argv[1:]
for i in range(0, len(args), 3):
    make(*args[i:i + 3])
PY
}
conv() {  # OVA: converts to the source's bytes
    rm -f out.raw
    ok "$DISKIMG" convert -O raw "$1" out.raw
    cmp src.raw out.raw || fail "$1: wrong content"
    rm -f out.raw
    ok "$DISKIMG" convert -O raw - out.raw < <(cat "$1")
    cmp src.raw out.raw || fail "$1 from a pipe: wrong content"
}

long=$(printf 'L%.0s' $(seq 1 300))/$(printf 'd%.0s' $(seq 1 600)).vmdk
toolong=$(printf 'd%.0s' $(seq 1 1100)).vmdk
mk size.ova pax-size disk.vmdk \
   ustar.ova ustar "$(printf 'p%.0s' $(seq 1 155))/$(printf 'n%.0s' $(seq 1 95)).vmdk" \
   long-gnu.ova gnu "$long" long-pax.ova pax "$long" times.ova gnu-times disk.vmdk \
   toolong.ova gnu "$toolong" toolong-pax.ova pax "$toolong" nul.ova gnu-nul "$long" \
   bad.ova pax-bad "$long" sparse.ova pax-sparse disk.vmdk
for ova in size ustar long-gnu long-pax times; do
    conv $ova.ova
done

expect_error "tar long name record of 1106 bytes is too long \(max 1025\)" \
    "$DISKIMG" convert -O raw toolong.ova o.raw
expect_error "tar pax extended header is malformed" "$DISKIMG" convert -O raw toolong-pax.ova o.raw
expect_error "tar long name holds a NUL byte" "$DISKIMG" convert -O raw nul.ova o.raw
expect_error "tar pax extended header is malformed" "$DISKIMG" convert -O raw bad.ova o.raw
expect_error "holds no .vmdk disk" "$DISKIMG" convert -O raw sparse.ova o.raw
[ ! -e o.raw ] || fail "an output was left"
exit 0
