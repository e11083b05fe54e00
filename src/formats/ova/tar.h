/* tar: what an OVA reader needs of a tar archive (ustar/GNU/pax): header
 * blocks, pax records and member names.  Pure functions (ova/tar.c). */
#ifndef DISKIMG_TAR_H
#define DISKIMG_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

#define TAR_BLOCK 512u

enum tar_kind { TAR_END, TAR_FILE, TAR_LONGNAME, TAR_PAX, TAR_OTHER };

struct tar_member {
    enum tar_kind kind;
    char name[257];        /* prefix/name (ustar: 155 + '/' + 100), NUL-terminated */
    uint64_t size;         /* bytes of data that follow the header */
};

/* Decode one 512-byte tar header block: checksum, size (octal or base-256),
 * type.  An all-zero block is TAR_END. */
int tar_header_decode(const uint8_t *b, struct tar_member *m, struct diag *d,
                      const char *file, int64_t off);

/* The "path" record of a pax extended header, copied into name (returns
 * false if there is none or it does not fit). */
bool tar_pax_path(const char *rec, size_t len, char *name, size_t cap);

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
