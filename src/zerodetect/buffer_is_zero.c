#include "zerodetect/zerodetect.h"

#include <string.h>

static bool is_zero_generic(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i])
            return false;
    return true;
}

bool buffer_is_zero(const void *buf, size_t len)
{
    return is_zero_generic(buf, len);
}

const char *zd_impl_name(void)
{
    return "generic";
}

size_t zd_impls(const char **names, zd_fn *fns, bool *usable, size_t max)
{
    if (max < 1)
        return 0;
    names[0] = "generic";
    fns[0] = is_zero_generic;
    usable[0] = true;
    return 1;
}
