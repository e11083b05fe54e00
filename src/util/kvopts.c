#include "util/kvopts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/size.h"

/* Out of memory leaves the list as it was and returns -ENOMEM. */
int kvopts_set(struct kvopts *o, const char *key, const char *val)
{
    char *v = strdup(val);

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < o->n; i++) {
        if (strcmp(o->v[i].key, key) == 0) {
            free(o->v[i].val);
            o->v[i].val = v;
            return 0;
        }
    }
    char *k = strdup(key);
    struct kv *nv = k ? realloc(o->v, (o->n + 1) * sizeof(*o->v)) : NULL;
    if (!nv) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    o->v = nv;
    o->v[o->n].key = k;
    o->v[o->n].val = v;
    o->v[o->n].used = false;
    o->n++;
    return 0;
}

/* Copy one ',' separated item of s into buf, turning ",," into ','. */
static const char *next_item(const char *s, char *buf, size_t cap, bool *too_long)
{
    size_t n = 0;

    *too_long = false;
    while (*s) {
        if (*s == ',') {
            if (s[1] != ',')
                break;
            s++;
        }
        if (n + 1 < cap)
            buf[n++] = *s;
        else
            *too_long = true;
        s++;
    }
    buf[n] = '\0';
    return *s == ',' ? s + 1 : s;
}

int kvopts_parse(struct kvopts *o, const char *s, char *err, size_t errlen)
{
    char item[4096];
    bool too_long;

    if (!*s) {
        snprintf(err, errlen, "empty option list");
        return -EINVAL;
    }
    while (*s) {
        s = next_item(s, item, sizeof(item), &too_long);
        if (too_long) {
            snprintf(err, errlen, "option too long");
            return -EINVAL;
        }
        if (!item[0]) {
            snprintf(err, errlen, "empty option in list");
            return -EINVAL;
        }
        char *eq = strchr(item, '=');
        const char *val = "on";
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        if (!item[0]) {
            snprintf(err, errlen, "option without a name");
            return -EINVAL;
        }
        int r = kvopts_set(o, item, val);
        if (r < 0) {
            snprintf(err, errlen, "out of memory");
            return r;
        }
    }
    return 0;
}

const char *kvopts_get(struct kvopts *o, const char *key)
{
    if (!o)
        return NULL;
    for (size_t i = 0; i < o->n; i++) {
        if (strcmp(o->v[i].key, key) == 0) {
            o->v[i].used = true;
            return o->v[i].val;
        }
    }
    return NULL;
}

int kvopts_get_size(struct kvopts *o, const char *key, uint64_t *val,
                    char *err, size_t errlen)
{
    const char *s = kvopts_get(o, key);
    uint64_t v;

    if (!s)
        return 0;
    if (size_parse(s, 1, &v) < 0) {
        snprintf(err, errlen, "parameter '%s' expects a size (e.g. 64K), got '%s'", key, s);
        return -EINVAL;
    }
    *val = v;
    return 1;
}

int kvopts_get_bool(struct kvopts *o, const char *key, bool *val,
                    char *err, size_t errlen)
{
    const char *s = kvopts_get(o, key);

    if (!s)
        return 0;
    if (!strcmp(s, "on") || !strcmp(s, "true") || !strcmp(s, "yes")) {
        *val = true;
        return 1;
    }
    if (!strcmp(s, "off") || !strcmp(s, "false") || !strcmp(s, "no")) {
        *val = false;
        return 1;
    }
    snprintf(err, errlen, "parameter '%s' expects 'on' or 'off', got '%s'", key, s);
    return -EINVAL;
}

const char *kvopts_unused(const struct kvopts *o)
{
    if (!o)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!o->v[i].used)
            return o->v[i].key;
    return NULL;
}

bool kvopts_wants_help(const struct kvopts *o)
{
    return o && o->n == 1 && (!strcmp(o->v[0].key, "help") || !strcmp(o->v[0].key, "?"));
}

void kvopts_free(struct kvopts *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->v[i].key);
        free(o->v[i].val);
    }
    free(o->v);
    o->v = NULL;
    o->n = 0;
}
