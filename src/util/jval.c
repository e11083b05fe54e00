#include "util/jval.h"

#include <stdlib.h>
#include <string.h>

static void *must(void *p)
{
    if (!p) {
        fputs("diskimg: out of memory\n", stderr);
        abort();
    }
    return p;
}

static struct jval *mk(enum jtype t)
{
    struct jval *v = must(calloc(1, sizeof(*v)));
    v->type = t;
    return v;
}

struct jval *jv_null(void) { return mk(J_NULL); }
struct jval *jv_bool(bool b) { struct jval *v = mk(J_BOOL); v->v.b = b; return v; }
struct jval *jv_int(int64_t i) { struct jval *v = mk(J_INT); v->v.i = i; return v; }
struct jval *jv_uint(uint64_t u) { struct jval *v = mk(J_UINT); v->v.u = u; return v; }
struct jval *jv_double(double d) { struct jval *v = mk(J_DOUBLE); v->v.d = d; return v; }
struct jval *jv_array(void) { return mk(J_ARRAY); }
struct jval *jv_object(void) { return mk(J_OBJECT); }

struct jval *jv_str(const char *s)
{
    struct jval *v = mk(J_STRING);
    v->v.s = must(strdup(s ? s : ""));
    return v;
}

static void grow(struct jval *c)
{
    if (c->n < c->cap)
        return;
    c->cap = c->cap ? c->cap * 2 : 8;
    c->items = must(realloc(c->items, c->cap * sizeof(*c->items)));
    if (c->type == J_OBJECT)
        c->keys = must(realloc(c->keys, c->cap * sizeof(*c->keys)));
}

struct jval *jv_set(struct jval *obj, const char *key, struct jval *v)
{
    for (size_t i = 0; i < obj->n; i++) {
        if (strcmp(obj->keys[i], key) == 0) {
            jv_free(obj->items[i]);
            obj->items[i] = v;
            return v;
        }
    }
    grow(obj);
    obj->keys[obj->n] = must(strdup(key));
    obj->items[obj->n++] = v;
    return v;
}

struct jval *jv_push(struct jval *arr, struct jval *v)
{
    grow(arr);
    arr->items[arr->n++] = v;
    return v;
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

void jv_print_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void print_scalar(FILE *out, const struct jval *v)
{
    switch (v->type) {
    case J_NULL: fputs("null", out); break;
    case J_BOOL: fputs(v->v.b ? "true" : "false", out); break;
    case J_INT: fprintf(out, "%lld", (long long)v->v.i); break;
    case J_UINT: fprintf(out, "%llu", (unsigned long long)v->v.u); break;
    case J_DOUBLE: fprintf(out, "%.17g", v->v.d); break;
    case J_STRING: jv_print_string(out, v->v.s); break;
    default: break;
    }
}

static void pad(FILE *out, int n)
{
    for (int i = 0; i < n; i++)
        fputs("    ", out);
}

void jv_print_json(FILE *out, const struct jval *v, int indent)
{
    if (v->type != J_ARRAY && v->type != J_OBJECT) {
        print_scalar(out, v);
        return;
    }
    bool obj = v->type == J_OBJECT;
    /* qemu prints an empty container over two lines too: "[\n    ]" */
    fputs(obj ? "{\n" : "[\n", out);
    for (size_t i = 0; i < v->n; i++) {
        pad(out, indent + 1);
        if (obj) {
            jv_print_string(out, v->keys[i]);
            fputs(": ", out);
        }
        jv_print_json(out, v->items[i], indent + 1);
        fputs(i + 1 < v->n ? ",\n" : "\n", out);
    }
    pad(out, indent);
    fputc(obj ? '}' : ']', out);
}

void jv_print_compact(FILE *out, const struct jval *v)
{
    if (v->type != J_ARRAY && v->type != J_OBJECT) {
        print_scalar(out, v);
        return;
    }
    bool obj = v->type == J_OBJECT;
    fputc(obj ? '{' : '[', out);
    for (size_t i = 0; i < v->n; i++) {
        if (i)
            fputs(", ", out);
        if (obj) {
            jv_print_string(out, v->keys[i]);
            fputs(": ", out);
        }
        jv_print_compact(out, v->items[i]);
    }
    fputc(obj ? '}' : ']', out);
}
