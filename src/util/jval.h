/* jval: a small tree of JSON values, built by commands and drivers and
 * turned into JSON text (the layout of qemu-img --output=json: 4-space
 * indent, keys in insertion order) that the program prints; the program
 * prints qemu-img's indented human form from the tree itself.
 * Out of memory never aborts: a constructor returns NULL, jv_set/jv_push
 * accept NULL (for the value or the container: the value is freed, the
 * container marked), and jv_status() tells the caller, once, before it uses
 * the tree, whether anything was lost on the way.
 */
#ifndef DISKIMG_JVAL_H
#define DISKIMG_JVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jtype { J_NULL, J_BOOL, J_INT, J_UINT, J_DOUBLE, J_STRING, J_ARRAY, J_OBJECT };

struct jval {
    enum jtype type;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double d;
        char *s;
    } v;
    /* J_ARRAY / J_OBJECT children, in order; keys for J_OBJECT */
    struct jval **items;
    char **keys;
    size_t n, cap;
    bool failed;      /* a child could not be added (out of memory) */
};

struct jval *jv_null(void);
struct jval *jv_bool(bool b);
struct jval *jv_int(int64_t i);
struct jval *jv_uint(uint64_t u);
struct jval *jv_double(double d);
struct jval *jv_str(const char *s);
struct jval *jv_array(void);
struct jval *jv_object(void);

/* Set obj[key] = v (replacing an existing key in place); returns v, or
 * NULL when obj or v is NULL or memory ran out (v is then freed). */
struct jval *jv_set(struct jval *obj, const char *key, struct jval *v);
/* Append v to arr; returns v, or NULL as jv_set does. */
struct jval *jv_push(struct jval *arr, struct jval *v);
/* obj[key] or NULL. */
struct jval *jv_get(const struct jval *obj, const char *key);

void jv_free(struct jval *v);

/* 0 when the tree `v` is whole; -ENOMEM when v is NULL or a value was lost
 * building it.  Check before printing or reading a tree. */
int jv_status(const struct jval *v);

/* JSON, pretty-printed with 4-space indentation (nested `indent` levels
 * deep), no trailing newline.  A string the caller frees, or NULL when
 * memory ran out. */
char *jv_to_json(const struct jval *v, int indent);
/* One-line JSON, as jv_to_json. */
char *jv_to_compact(const struct jval *v);

#endif
