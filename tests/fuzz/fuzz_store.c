/*
 * fuzz_store.c - a store directory built from the input: open it (typed
 * layer, then engine), gather every record, verify each, then delete,
 * compact and append. Nothing may crash, hang or leak; every refusal is a
 * status.
 *
 * Input: a sequence of files, each [u8 which][u16le length][bytes]; which
 * (mod 9) picks meta.zr, store.zr, 0.loc, 0.chunk, 1.chunk, dict.zr,
 * journal.zr, 1.loc or 2.chunk. A later entry for the same file appends.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "fuzz_common.h"
#include "zrengine.h"
#include "zrstore.h"

static const char *const names[9] = {"meta.zr", "store.zr", "0.loc", "0.chunk", "1.chunk",
                                     "dict.zr", "journal.zr", "1.loc", "2.chunk"};

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/store", fuzz_scratch());
    mkdir(dir, 0700);
    clear_dir(dir);
    size_t pos = 0;
    while (pos + 3 <= size) {
        unsigned which = data[pos] % 9;
        size_t n = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
        pos += 3;
        if (n > size - pos)
            n = size - pos;
        char p[400];
        snprintf(p, sizeof p, "%s/%s", dir, names[which]);
        FILE *f = fopen(p, "ab");
        if (!f)
            abort();
        if (n && fwrite(data + pos, 1, n, f) != n)
            abort();
        fclose(f);
        pos += n;
    }

    zrs_store *s = NULL;
    if (zrs_open_ex(&s, dir, ZRE_OPEN_READONLY) == ZR_OK)
        zrs_close(s);

    zre_engine *e = NULL;
    int rc = zre_open(&e, dir);
    if (rc != ZR_OK)
        rc = zre_open_ex(&e, dir, ZRE_OPEN_RECOVER);
    if (rc != ZR_OK)
        return 0;
    uint64_t n = zre_length(e);
    if (n > 4096)
        n = 4096;
    unsigned char *buf = NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sz = 0;
        if (zre_record_sizes(e, &i, 1, &sz) != ZR_OK || sz > (1u << 20))
            continue;
        unsigned char *nb = realloc(buf, sz ? sz : 1);
        if (!nb)
            break;
        buf = nb;
        (void)zre_gather(e, &i, 1, buf, sz, sz, NULL);
        (void)zre_check_record(e, i);
    }
    free(buf);
    zre_stats st;
    (void)zre_get_stats(e, &st);
    if (n > 0) {
        uint64_t idx[2] = {0, n - 1};
        (void)zre_delete(e, idx, n > 1 ? 2 : 1);
    }
    (void)zre_compact(e);
    static const unsigned char rec[24] = "appended after the fuzz";
    (void)zre_append(e, rec, sizeof rec, NULL, 1, NULL);
    zre_close(e);
    return 0;
}
