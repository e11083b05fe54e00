/* --object definitions, checked as qemu-img 7.2 checks them (object_opt.h). */
#include "object_opt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The object types qemu-img 7.2 can create, as `--object help` lists them. */
static const char *const creatable[] = {
    "authz-list", "authz-list-file", "authz-simple", "main-loop", "pr-manager-helper",
    "secret", "secret_keyring", "thread-context", "throttle-group", "tls-cipher-suites",
    "tls-creds-anon", "tls-creds-psk", "tls-creds-x509",
};

/* Types qemu knows by name but qemu-img cannot make ("invalid object type"
 * after the id is checked, where an unknown name is refused at once). */
static const char *const known_elsewhere[] = {
    "authz-listfile", "authz-pam", "can-bus", "can-host-socketcan", "colo-compare",
    "cryptodev-backend", "cryptodev-backend-builtin", "cryptodev-vhost-user",
    "dbus-vmstate", "filter-buffer", "filter-dump", "filter-mirror", "filter-redirector",
    "filter-replay", "filter-rewriter", "input-barrier", "input-linux", "iothread",
    "memory-backend-epc", "memory-backend-file", "memory-backend-memfd",
    "memory-backend-ram", "pef-guest", "rng-builtin", "rng-egd", "rng-random",
    "s390-pv-guest", "sev-guest", "x-remote-object", "x-vfio-user-server",
};

static const char *const secret_keys[] = { "data", "file", "format", "iv", "keyid",
                                           "loaded" };

#define MAX_PAIRS 64

struct pair {
    char key[128];
    char *val;          /* NULL: a bare word */
};

/* The ids earlier --object options defined ("s:" secrets, "o:" others),
 * NUL-separated: a command line has a handful. */
static char seen[4096];
static size_t seen_len;

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

#define IN(s, list) in_list(s, list, sizeof(list) / sizeof(list[0]))

static bool seen_id(const char *id, bool secret_only)
{
    for (size_t i = 0; i < seen_len; i += strlen(seen + i) + 1)
        if (!strcmp(seen + i + 2, id) && (!secret_only || seen[i] == 's'))
            return true;
    return false;
}

static void remember(const char *id, bool secret)
{
    size_t n = strlen(id) + 3;
    if (seen_len + n > sizeof(seen))
        return;
    snprintf(seen + seen_len, n, "%c:%s", secret ? 's' : 'o', id);
    seen_len += n;
}

/* A key as qemu's keyval accepts one: dot-separated names of letters,
 * digits, '-' and '_'. */
static bool valid_key(const char *k)
{
    if (!*k)
        return false;
    for (const char *p = k; *p; p++) {
        if (*p == '.' && (p == k || !p[1] || p[1] == '.'))
            return false;
        if (*p != '.' && !isalnum((unsigned char)*p) && *p != '-' && *p != '_')
            return false;
    }
    return true;
}

/* qemu's identifiers: a letter, then letters, digits, '-', '.', '_'. */
static bool valid_id(const char *s)
{
    if (!isalpha((unsigned char)*s))
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("-._", *p))
            return false;
    return true;
}

__attribute__((format(printf, 1, 2)))
static int refuse(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli_error("%s", msg);
    return 1;
}

/* Split `def` into pairs as qemu's keyval does (",," is a comma in a
 * value; a first element without '=' is the qom-type; a trailing comma
 * ends the list).  0, or 1 refused (printed); *help when one element is
 * "help" or "?". */
static int split(const char *def, char *buf, struct pair *pairs, size_t *n, bool *help)
{
    const char *p = def;
    char *out = buf;

    *n = 0;
    *help = false;
    for (bool first = true; *p; first = false) {
        size_t k = strcspn(p, "=,");
        char key[128];
        snprintf(key, sizeof(key), "%.*s", (int)(k < sizeof(key) ? k : sizeof(key) - 1), p);
        bool bare = p[k] != '=';
        bool is_help = bare && (!strcmp(key, "help") || !strcmp(key, "?"));
        if (is_help) {
            *help = true;
            p += k;
        } else if (bare && first && k > 0) {
            snprintf(key, sizeof(key), "qom-type");     /* the value is the element */
        } else if (bare && valid_key(key)) {
            return refuse("Expected '=' after parameter '%s'", key);
        } else if (!valid_key(key)) {
            return refuse("Invalid parameter '%s'", key);
        } else {
            p += k + 1;                                 /* past "key=" */
        }
        if (!is_help) {
            if (*n == MAX_PAIRS)
                return refuse("too many parameters in --object");
            snprintf(pairs[*n].key, sizeof(pairs[*n].key), "%s", key);
            pairs[(*n)++].val = out;
            for (; *p; p++) {
                if (*p == ',' && p[1] != ',')
                    break;
                if (*p == ',')
                    p++;
                *out++ = *p;
            }
            *out++ = 0;
        }
        if (*p)
            p++;        /* the ',' */
    }
    return 0;
}

static const char *get(struct pair *pairs, size_t n, const char *key)
{
    const char *v = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pairs[i].key, key))
            v = pairs[i].val;
    return v;
}

static void print_help(const char *type)
{
    if (!type) {
        puts("List of user creatable objects:");
        for (size_t i = 0; i < sizeof(creatable) / sizeof(creatable[0]); i++)
            printf("  %s\n", creatable[i]);
    } else if (!strcmp(type, "secret")) {
        puts("secret options:\n  data=<string>\n  file=<string>\n"
             "  format=<QCryptoSecretFormat>\n  iv=<string>\n  keyid=<string>");
    } else {
        printf("%s options: (not listed: diskimg uses no %s objects)\n", type, type);
    }
}

/* The checks qemu-img's secret object makes when it is created. */
static int check_secret(struct pair *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pairs[i].key, "qom-type") && strcmp(pairs[i].key, "id") &&
            !IN(pairs[i].key, secret_keys))
            return refuse("Parameter '%s' is unexpected", pairs[i].key);
    const char *data = get(pairs, n, "data"), *file = get(pairs, n, "file");
    const char *format = get(pairs, n, "format"), *keyid = get(pairs, n, "keyid");
    if (format && strcmp(format, "raw") && strcmp(format, "base64"))
        return refuse("Parameter 'format' does not accept value '%s'", format);
    if (get(pairs, n, "loaded"))
        return refuse("Property 'secret.loaded' is not writable");
    if (data && file)
        return refuse("'file' and 'data' are mutually exclusive");
    if (!data && !file)
        return refuse("Either 'file' or 'data' must be provided");
    if (file) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return refuse("Unable to read %s: Failed to open file \xe2\x80\x9c%s\xe2\x80\x9d: %s",
                          file, file, strerror(errno));
        close(fd);
    }
    if (keyid && !seen_id(keyid, true))
        return refuse("No secret with id '%s'", keyid);
    return 0;
}

/* The checks in qemu-img's order: the list, the type, the id, the type's
 * own properties, then the id among the objects made before. */
static int check(struct pair *pairs, size_t n)
{
    const char *type = get(pairs, n, "qom-type"), *id = get(pairs, n, "id");
    int rc;

    if (!type)
        return refuse("Parameter 'qom-type' is missing");
    if (!IN(type, creatable) && !IN(type, known_elsewhere))
        return refuse("Parameter 'qom-type' does not accept value '%s'", type);
    if (!id)
        return refuse("Parameter 'id' is missing");
    if (!valid_id(id))
        return refuse("Parameter 'id' expects an identifier\nIdentifiers consist of "
                      "letters, digits, '-', '.', '_', starting with a letter.");
    if (!IN(type, creatable))
        return refuse("invalid object type: %s", type);
    if (!strcmp(type, "secret") && (rc = check_secret(pairs, n)) != 0)
        return rc;
    if (seen_id(id, false))
        return refuse("attempt to add duplicate property '%s' to object (type "
                      "'container')", id);
    remember(id, !strcmp(type, "secret"));
    return 0;
}

int cli_object(const char *def)
{
    struct pair pairs[MAX_PAIRS];
    size_t n;
    bool help;

    if (def[0] == '{')
        return 0;       /* the JSON form: taken as it is */
    char *buf = malloc(strlen(def) + 1);
    if (!buf) {
        cli_error("out of memory");
        return 1;
    }
    int rc = split(def, buf, pairs, &n, &help);
    if (rc == 0 && help) {
        print_help(get(pairs, n, "qom-type"));
        rc = -1;
    } else if (rc == 0) {
        rc = check(pairs, n);
    }
    free(buf);
    return rc;
}
