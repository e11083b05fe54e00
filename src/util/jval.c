#include "util/jval.h"

#include "util/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory: the constructors return NULL and jv_set/jv_push take NULL
 * for a value or a container; a container that lost a value is marked
 * `failed`, and jv_status() finds the mark anywhere in the tree. */

static struct jval *mk(enum jtype t)
{
    struct jval *v = calloc(1, sizeof(*v));
    if (v)
        v->type = t;
    return v;
}

struct jval *jv_null(void) { return mk(J_NULL); }
struct jval *jv_array(void) { return mk(J_ARRAY); }
struct jval *jv_object(void) { return mk(J_OBJECT); }

struct jval *jv_bool(bool b)
{
    struct jval *v = mk(J_BOOL);
    if (v)
        v->v.b = b;
    return v;
}

struct jval *jv_int(int64_t i)
{
    struct jval *v = mk(J_INT);
    if (v)
        v->v.i = i;
    return v;
}

struct jval *jv_uint(uint64_t u)
{
    struct jval *v = mk(J_UINT);
    if (v)
        v->v.u = u;
    return v;
}

struct jval *jv_double(double d)
{
    struct jval *v = mk(J_DOUBLE);
    if (v)
        v->v.d = d;
    return v;
}

struct jval *jv_str(const char *s)
{
    struct jval *v = mk(J_STRING);
    if (v && !(v->v.s = strdup(s ? s : ""))) {
        free(v);
        v = NULL;
    }
    return v;
}

/* Room for one more child; false (and nothing changed) when out of memory. */
static bool grow(struct jval *c)
{
    if (c->n < c->cap)
        return true;
    size_t cap = c->cap ? c->cap * 2 : 8;
    struct jval **items = realloc(c->items, cap * sizeof(*items));
    if (!items)
        return false;
    c->items = items;
    if (c->type == J_OBJECT) {
        char **keys = realloc(c->keys, cap * sizeof(*keys));
        if (!keys)
            return false;  /* items is bigger than needed: harmless */
        c->keys = keys;
    }
    c->cap = cap;
    return true;
}

struct jval *jv_set(struct jval *obj, const char *key, struct jval *v)
{
    if (!obj) {
        jv_free(v);
        return NULL;
    }
    if (!v) {
        obj->failed = true;
        return NULL;
    }
    for (size_t i = 0; i < obj->n; i++) {
        if (strcmp(obj->keys[i], key) == 0) {
            jv_free(obj->items[i]);
            obj->items[i] = v;
            return v;
        }
    }
    char *k = grow(obj) ? strdup(key) : NULL;
    if (!k) {
        obj->failed = true;
        jv_free(v);
        return NULL;
    }
    obj->keys[obj->n] = k;
    obj->items[obj->n++] = v;
    return v;
}

struct jval *jv_push(struct jval *arr, struct jval *v)
{
    if (!arr) {
        jv_free(v);
        return NULL;
    }
    if (!v || !grow(arr)) {
        arr->failed = true;
        jv_free(v);
        return NULL;
    }
    arr->items[arr->n++] = v;
    return v;
}

int jv_status(const struct jval *v)
{
    if (!v || v->failed)
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++)
        if (jv_status(v->items[i]) < 0)
            return -ENOMEM;
    return 0;
}

struct jval *jv_get(const struct jval *obj, const char *key)
{
    if (!obj || obj->type != J_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

void jv_free(struct jval *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        jv_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    if (v->type == J_STRING)
        free(v->v.s);
    free(v);
}

static void put_string(struct strbuf *b, const char *s)
{
    sb_addc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_adds(b, "\\\""); break;
        case '\\': sb_adds(b, "\\\\"); break;
        case '\n': sb_adds(b, "\\n"); break;
        case '\r': sb_adds(b, "\\r"); break;
        case '\t': sb_adds(b, "\\t"); break;
        case '\b': sb_adds(b, "\\b"); break;
        case '\f': sb_adds(b, "\\f"); break;
        default:
            if (*p < 0x20)
                sb_addf(b, "\\u%04x", *p);
            else
                sb_addc(b, (char)*p);
        }
    }
    sb_addc(b, '"');
}

static void put_scalar(struct strbuf *b, const struct jval *v)
{
    switch (v->type) {
    case J_NULL: sb_adds(b, "null"); break;
    case J_BOOL: sb_adds(b, v->v.b ? "true" : "false"); break;
    case J_INT: sb_addf(b, "%lld", (long long)v->v.i); break;
    case J_UINT: sb_addf(b, "%llu", (unsigned long long)v->v.u); break;
    case J_DOUBLE: sb_addf(b, "%.17g", v->v.d); break;
    case J_STRING: put_string(b, v->v.s); break;
    default: break;
    }
}

static void pad(struct strbuf *b, int n)
{
    for (int i = 0; i < n; i++)
        sb_adds(b, "    ");
}

static void put_json(struct strbuf *b, const struct jval *v, int indent)
{
    if (v->type != J_ARRAY && v->type != J_OBJECT) {
        put_scalar(b, v);
        return;
    }
    bool obj = v->type == J_OBJECT;
    /* qemu prints an empty container over two lines too: "[\n    ]" */
    sb_adds(b, obj ? "{\n" : "[\n");
    for (size_t i = 0; i < v->n; i++) {
        pad(b, indent + 1);
        if (obj) {
            put_string(b, v->keys[i]);
            sb_adds(b, ": ");
        }
        put_json(b, v->items[i], indent + 1);
        sb_adds(b, i + 1 < v->n ? ",\n" : "\n");
    }
    pad(b, indent);
    sb_addc(b, obj ? '}' : ']');
}

static void put_compact(struct strbuf *b, const struct jval *v)
{
    if (v->type != J_ARRAY && v->type != J_OBJECT) {
        put_scalar(b, v);
        return;
    }
    bool obj = v->type == J_OBJECT;
    sb_addc(b, obj ? '{' : '[');
    for (size_t i = 0; i < v->n; i++) {
        if (i)
            sb_adds(b, ", ");
        if (obj) {
            put_string(b, v->keys[i]);
            sb_adds(b, ": ");
        }
        put_compact(b, v->items[i]);
    }
    sb_addc(b, obj ? '}' : ']');
}

char *jv_to_json(const struct jval *v, int indent)
{
    struct strbuf b;

    sb_init(&b);
    put_json(&b, v, indent);
    return sb_take(&b);
}

char *jv_to_compact(const struct jval *v)
{
    struct strbuf b;

    sb_init(&b);
    put_compact(&b, v);
    return sb_take(&b);
}
