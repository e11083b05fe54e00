/* tar: the parts of a tar archive an OVA reader needs beyond one header
 * block (tar_header_decode, in formats/vmdk/format.h): pax records and member names. */
#ifndef DISKIMG_TAR_H
#define DISKIMG_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TAR_MAX_NAME 1024u     /* bytes of one member name */

/* The records of a pax extended header that matter here. */
struct tar_pax {
    char path[TAR_MAX_NAME + 1];
    bool have_path, have_size;
    bool sparse;               /* GNU.sparse.* records: a GNU sparse file */
    uint64_t size;
};

/* Decode pax records ("LEN key=value\n"...): "path", "size", and whether
 * any "GNU.sparse." key is there.  False if a record is malformed, a path
 * holds a NUL or is longer than TAR_MAX_NAME, or a size is not a number. */
bool tar_pax_decode(const char *rec, size_t len, struct tar_pax *pi);

/* `dir` (may be "") joined with `rel`, with "", "." and ".." resolved as
 * text; NULL if it climbs above the archive's root, names the root itself,
 * or memory runs out.  A leading '/' is dropped, as tar does.  malloc'd. */
char *tar_member_path(const char *dir, const char *rel);

#endif
