/*
 * config.c - where a remote store lives and how to reach it: the URL, the
 * cache settings (ZR_CACHE_*, ZR_REMOTE_*) and, for s3:// URLs, the AWS
 * credentials, region and endpoint from the standard environment
 * variables and profile files (the precedence of the AWS CLI and SDKs:
 * environment first, then the profile's credentials file, then its config
 * file).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote_internal.h"

int zrr_is_url(const char *s)
{
    return s && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0 ||
                 strncmp(s, "s3://", 5) == 0);
}

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int zrr_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    double r = v * mul;
    if (r >= 1.8e19)
        return -1;
    *out = (uint64_t)r;
    return 0;
}

static int env_uint(const char *name, unsigned lo, unsigned hi, unsigned dflt, unsigned *out)
{
    const char *v = env(name);
    if (!v) {
        *out = dflt;
        return ZR_OK;
    }
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || n < lo || n > hi)
        return zr_set_error(ZR_EINVAL, "remote: %s=%s, expected a whole number from %u to %u", name,
                            v, lo, hi);
    *out = (unsigned)n;
    return ZR_OK;
}

/* ------------------------------------------------- AWS profile files */

/* The value of `key` in section `section` of the INI file `path`, or NULL
 * (malloc'd). Lines are "key = value"; '#' and ';' start comments. */
static char *ini_get(const char *path, const char *section, const char *key)
{
    if (!path)
        return NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[4096];
    bool in = false;
    char *found = NULL;
    while (!found && fgets(line, sizeof line, f)) {
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        size_t n = strlen(p);
        while (n > 0 && isspace((unsigned char)p[n - 1]))
            p[--n] = '\0';
        if (*p == '#' || *p == ';' || *p == '\0')
            continue;
        if (*p == '[') {
            char *q = strchr(p, ']');
            if (q) {
                *q = '\0';
                char *name = p + 1;
                while (isspace((unsigned char)*name))
                    name++;
                size_t m = strlen(name);
                while (m > 0 && isspace((unsigned char)name[m - 1]))
                    name[--m] = '\0';
                in = strcmp(name, section) == 0;
            }
            continue;
        }
        if (!in)
            continue;
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        char *k = p, *v = eq + 1;
        *eq = '\0';
        size_t kl = strlen(k);
        while (kl > 0 && isspace((unsigned char)k[kl - 1]))
            k[--kl] = '\0';
        while (isspace((unsigned char)*v))
            v++;
        if (strcmp(k, key) == 0 && *v)
            found = strdup(v);
    }
    fclose(f);
    return found;
}

static char *home_file(const char *env_name, const char *rel)
{
    const char *v = env(env_name);
    if (v)
        return strdup(v);
    const char *home = env("HOME");
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", home, rel);
    return p;
}

/* A profile setting: the credentials file's [profile] first, then the
 * config file's [profile NAME] ([default] for the default profile). */
static char *profile_get(const char *profile, const char *key)
{
    char *creds = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    char *v = ini_get(creds, profile, key);
    free(creds);
    if (v)
        return v;
    char *conf = home_file("AWS_CONFIG_FILE", ".aws/config");
    char section[256];
    if (strcmp(profile, "default") == 0)
        snprintf(section, sizeof section, "default");
    else
        snprintf(section, sizeof section, "profile %s", profile);
    v = ini_get(conf, section, key);
    free(conf);
    return v;
}

/* ------------------------------------------------------------- load */

static int load_s3(zrr_config *cfg, const char *url)
{
    const char *rest = url + 5;
    const char *slash = strchr(rest, '/');
    size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (blen == 0)
        return zr_set_error(ZR_EINVAL, "remote: %s names no bucket (expected s3://bucket/prefix)",
                            url);
    char bucket[256];
    if (blen >= sizeof bucket)
        return zr_set_error(ZR_EINVAL, "remote: the bucket name of %s is too long", url);
    memcpy(bucket, rest, blen);
    bucket[blen] = '\0';
    const char *prefix = slash ? slash + 1 : "";
    char *pre = strdup(prefix);
    if (!pre)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    size_t pl = strlen(pre);
    while (pl > 0 && pre[pl - 1] == '/')
        pre[--pl] = '\0';

    const char *profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
    cfg->access_key = dup_or_null(env("AWS_ACCESS_KEY_ID"));
    cfg->secret_key = dup_or_null(env("AWS_SECRET_ACCESS_KEY"));
    cfg->token = dup_or_null(env("AWS_SESSION_TOKEN"));
    if (!cfg->access_key || !cfg->secret_key) {
        free(cfg->access_key);
        free(cfg->secret_key);
        free(cfg->token);
        cfg->access_key = profile_get(profile, "aws_access_key_id");
        cfg->secret_key = profile_get(profile, "aws_secret_access_key");
        cfg->token = profile_get(profile, "aws_session_token");
    }
    if (!cfg->access_key != !cfg->secret_key) {
        free(pre);
        return zr_set_error(ZR_EINVAL, "remote: %s: the AWS credentials are incomplete (an access "
                            "key id without its secret access key, or the reverse; profile '%s')",
                            url, profile);
    }
    const char *r = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
    cfg->region = r ? strdup(r) : profile_get(profile, "region");
    if (!cfg->region)
        cfg->region = strdup("us-east-1");
    const char *ep = env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3")
                                                 : env("AWS_ENDPOINT_URL");
    char *endpoint = ep ? strdup(ep) : profile_get(profile, "endpoint_url");
    char *epre = zrr_url_path_escape(pre);
    free(pre);
    if (!epre || !cfg->region) {
        free(endpoint);
        free(epre);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    size_t n = (endpoint ? strlen(endpoint) : 0) + strlen(bucket) + strlen(epre) +
               strlen(cfg->region) + 64;
    cfg->base = malloc(n);
    if (cfg->base) {
        if (endpoint) {
            size_t el = strlen(endpoint);
            while (el > 0 && endpoint[el - 1] == '/')
                endpoint[--el] = '\0';
            /* A custom endpoint (S3-compatible servers): path-style. */
            snprintf(cfg->base, n, "%s/%s%s%s", endpoint, bucket, *epre ? "/" : "", epre);
        } else {
            snprintf(cfg->base, n, "https://%s.s3.%s.amazonaws.com%s%s", bucket, cfg->region,
                     *epre ? "/" : "", epre);
        }
    }
    free(endpoint);
    free(epre);
    return cfg->base ? ZR_OK : zr_set_error(ZR_ENOMEM, "remote: out of memory");
}

int zrr_config_load(zrr_config *cfg, const char *url)
{
    memset(cfg, 0, sizeof *cfg);
    int rc;
    if (strncmp(url, "s3://", 5) == 0) {
        cfg->s3 = true;
        rc = load_s3(cfg, url);
    } else {
        const char *host = strstr(url, "://") + 3;
        if (*host == '\0' || *host == '/')
            return zr_set_error(ZR_EINVAL, "remote: %s names no host", url);
        cfg->base = strdup(url);
        if (!cfg->base)
            return zr_set_error(ZR_ENOMEM, "remote: out of memory");
        size_t n = strlen(cfg->base);
        while (n > 0 && cfg->base[n - 1] == '/')
            cfg->base[--n] = '\0';
        rc = ZR_OK;
    }
    if (rc < 0) {
        zrr_config_free(cfg);
        return rc;
    }

    /* The cache. */
    const char *dir = env("ZR_CACHE_DIR");
    char *root = NULL;
    if (dir) {
        size_t n = strlen(dir) + 32;
        root = malloc(n);
        if (root)
            snprintf(root, n, "%s/zr-remote-v1", dir);
    } else {
        const char *xdg = env("XDG_CACHE_HOME");
        const char *home = env("HOME");
        size_t n = (xdg ? strlen(xdg) : home ? strlen(home) : 4) + 48;
        root = malloc(n);
        if (root) {
            if (xdg)
                snprintf(root, n, "%s/loaderx/zr-remote-v1", xdg);
            else if (home)
                snprintf(root, n, "%s/.cache/loaderx/zr-remote-v1", home);
            else
                snprintf(root, n, "./.cache/loaderx/zr-remote-v1");
        }
    }
    cfg->cache_root = root;
    if (!root) {
        zrr_config_free(cfg);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    cfg->cache_bytes = (uint64_t)10 << 30;
    const char *cap = env("ZR_CACHE_BYTES");
    if (cap && zrr_parse_bytes(cap, &cfg->cache_bytes) < 0) {
        zrr_config_free(cfg);
        return zr_set_error(ZR_EINVAL, "remote: ZR_CACHE_BYTES=%s, expected bytes with an optional "
                            "K, M, G or T suffix", cap);
    }
    cfg->block_shift = 20;
    const char *blk = env("ZR_CACHE_BLOCK");
    if (blk) {
        uint64_t b = 0;
        unsigned s = 12;
        if (zrr_parse_bytes(blk, &b) == 0)
            while (s <= 26 && ((uint64_t)1 << s) != b)
                s++;
        if (s > 26) {
            zrr_config_free(cfg);
            return zr_set_error(ZR_EINVAL, "remote: ZR_CACHE_BLOCK=%s, expected a power of two "
                                "from 4K to 64M", blk);
        }
        cfg->block_shift = s;
    }
    unsigned ct = 10, rt = 30;
    if ((rc = env_uint("ZR_REMOTE_CONNECTIONS", 1, 256, 16, &cfg->connections)) < 0 ||
        (rc = env_uint("ZR_REMOTE_RETRIES", 0, 100, 5, &cfg->retries)) < 0 ||
        (rc = env_uint("ZR_REMOTE_CONNECT_TIMEOUT", 1, 3600, 10, &ct)) < 0 ||
        (rc = env_uint("ZR_REMOTE_READ_TIMEOUT", 1, 3600, 30, &rt)) < 0) {
        zrr_config_free(cfg);
        return rc;
    }
    cfg->connect_timeout_s = (long)ct;
    cfg->read_timeout_s = (long)rt;
    return ZR_OK;
}

void zrr_config_free(zrr_config *cfg)
{
    free(cfg->cache_root);
    free(cfg->base);
    free(cfg->access_key);
    if (cfg->secret_key) {
        memset(cfg->secret_key, 0, strlen(cfg->secret_key));
        free(cfg->secret_key);
    }
    free(cfg->token);
    free(cfg->region);
    memset(cfg, 0, sizeof *cfg);
}

char *zrr_url_path_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
