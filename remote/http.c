/*
 * http.c - every request of the remote module, through libcurl.
 *
 * Small requests (HEAD at open, a whole small object, an upload) run on
 * the calling thread. Block downloads run on the ctx's worker thread: a
 * curl multi handle with up to `connections` range requests in flight,
 * each covering a run of adjacent missing blocks of one object. A checked
 * download goes to c->done; its blocks are written to the cache one at a
 * time by the writer threads and the threads waiting for a ticket (never
 * by the worker while writers run), and the job finishes (its ticket is
 * told) when its last block is written.
 *
 * Failures: connect and read timeouts (no byte for read_timeout seconds);
 * 5xx, 429, connection resets, timeouts and short bodies are retried with
 * exponential backoff (100 ms doubling to 5 s, with jitter; Retry-After up
 * to 30 s is honoured), `retries` times; 403, 404, 401 and S3's
 * credential errors fail at once with a message naming the object. An
 * object whose ETag or size differs from the one seen at open (If-Match
 * fails, or the response says so) is ZR_ECORRUPT "changed on the server".
 * Close and ZR_EINTR: a transfer in flight is aborted at once (progress
 * callback), so neither waits for a request timeout.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "remote_internal.h"

void zrr_err_set(zrr_err_buf *e, int status, const char *fmt, ...)
{
    if (e->status < 0)
        return; /* keep the first */
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------ one request */

typedef struct req {
    zrr_ctx *c;
    CURL *h;
    const char *url;
    /* response */
    long code;
    char etag[256];
    uint64_t range_total; /* Content-Range ".../total" */
    uint64_t content_length;
    bool have_range_total, have_length;
    unsigned retry_after_s;
    /* body: into buf[0..cap) (fixed) or a growing buffer (grow) */
    unsigned char *buf;
    size_t cap, got;
    bool grow, overflow;
    size_t max_len;
    char errbody[512]; /* the start of an error response (S3's XML) */
    size_t errlen;
    char curlerr[CURL_ERROR_SIZE];
} req;

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    req *r = arg;
    size_t len = size * n;
    char line[512];
    size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, p, m);
    line[m] = '\0';
    while (m > 0 && (line[m - 1] == '\r' || line[m - 1] == '\n'))
        line[--m] = '\0';
    if (strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a 100 or a redirect): forget the last. */
        r->etag[0] = '\0';
        r->have_range_total = r->have_length = false;
        r->retry_after_s = 0;
    } else if (strncasecmp(line, "etag:", 5) == 0) {
        const char *v = line + 5;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t k = strlen(v) < sizeof r->etag - 1 ? strlen(v) : sizeof r->etag - 1;
        memcpy(r->etag, v, k);
        r->etag[k] = '\0';
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        const char *slash = strchr(line, '/');
        if (slash && slash[1] != '*') {
            r->range_total = strtoull(slash + 1, NULL, 10);
            r->have_range_total = true;
        }
    } else if (strncasecmp(line, "content-length:", 15) == 0) {
        r->content_length = strtoull(line + 15, NULL, 10);
        r->have_length = true;
    } else if (strncasecmp(line, "retry-after:", 12) == 0) {
        unsigned long s = strtoul(line + 12, NULL, 10);
        r->retry_after_s = s > 30 ? 30 : (unsigned)s;
    }
    return len;
}

/* The body: an error response (status outside 2xx) only to errbody, for
 * its message; a success into buf, fixed (a range: more is an error) or
 * growing up to max_len. */
static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    req *r = arg;
    size_t len = size * n;
    long code = 0;
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200 || code >= 300) {
        if (r->errlen < sizeof r->errbody - 1) {
            size_t k = sizeof r->errbody - 1 - r->errlen;
            if (k > len)
                k = len;
            memcpy(r->errbody + r->errlen, p, k);
            r->errlen += k;
            r->errbody[r->errlen] = '\0';
        }
        return len;
    }
    if (r->got + len > r->cap) {
        if (!r->grow || r->got + len > r->max_len) {
            r->overflow = true;
            return 0; /* aborts: more bytes than asked for */
        }
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->got + len)
            cap *= 2;
        if (cap > r->max_len)
            cap = r->max_len;
        unsigned char *b = realloc(r->buf, cap);
        if (!b) {
            r->overflow = true;
            return 0;
        }
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->got, p, len);
    r->got += len;
    return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c2;
    (void)d;
    zrr_ctx *c = arg;
    if (atomic_load_explicit(&c->stop, memory_order_relaxed))
        return 1;
    if (c->interrupt && atomic_load_explicit(c->interrupt, memory_order_relaxed))
        return 1;
    return 0;
}

/* The common options of every request. `hdrs` gets the extra headers. */
static void setup(CURL *h, zrr_ctx *c, req *r, struct curl_slist **hdrs)
{
    const zrr_config *cfg = &c->cfg;
    r->h = h;
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, cfg->connect_timeout_s);
    /* The read timeout: no progress (under 1 byte/s) for read_timeout_s. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, cfg->read_timeout_s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curlerr);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "loaderx-in-c");
    if (c->curl_share)
        curl_easy_setopt(h, CURLOPT_SHARE, (CURLSH *)c->curl_share);
    if (!cfg->s3) {
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    } else if (cfg->access_key) {
        char sig[128];
        snprintf(sig, sizeof sig, "aws:amz:%s:s3", cfg->region);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sig);
        curl_easy_setopt(h, CURLOPT_USERNAME, cfg->access_key);
        curl_easy_setopt(h, CURLOPT_PASSWORD, cfg->secret_key);
        if (cfg->token) {
            size_t n = strlen(cfg->token) + 32;
            char *line = malloc(n);
            if (line) {
                snprintf(line, n, "x-amz-security-token: %s", cfg->token);
                *hdrs = curl_slist_append(*hdrs, line);
                free(line);
            }
        }
    }
}

/* S3's error code from an XML error body (<Code>...</Code>), or "". */
static void s3_code(const req *r, char *out, size_t cap)
{
    out[0] = '\0';
    const char *a = strstr(r->errbody, "<Code>");
    const char *b = a ? strstr(a, "</Code>") : NULL;
    if (a && b && (size_t)(b - a - 6) < cap) {
        memcpy(out, a + 6, (size_t)(b - a - 6));
        out[b - a - 6] = '\0';
    }
}

enum { R_OK, R_RETRY, R_FAIL, R_MISSING };

/* Classify a finished request: R_OK, R_RETRY (transient: the message in
 * `e` is kept for when retries run out), R_FAIL or R_MISSING (404). */
static int classify(zrr_ctx *c, CURLcode cc, req *r, const char *what, zrr_err_buf *e)
{
    if (cc == CURLE_ABORTED_BY_CALLBACK || (cc != CURLE_OK && atomic_load(&c->stop))) {
        if (atomic_load(&c->stop))
            zrr_err_set(e, ZR_ECLOSED, "%s %s: stopped, the store is being closed", what, r->url);
        else
            zrr_err_set(e, ZR_EINTR, "%s %s: interrupted", what, r->url);
        return R_FAIL;
    }
    if (cc == CURLE_WRITE_ERROR && r->overflow) {
        zrr_err_set(e, ZR_EIO, "%s %s: the server sent more bytes than asked for (over %zu)", what,
                    r->url, r->cap);
        return R_RETRY;
    }
    if (cc != CURLE_OK) {
        int transient = cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT ||
                        cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
                        cc == CURLE_GOT_NOTHING || cc == CURLE_PARTIAL_FILE ||
                        cc == CURLE_HTTP2 || cc == CURLE_HTTP2_STREAM ||
                        cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_COULDNT_RESOLVE_HOST;
        zrr_err_set(e, ZR_EIO, "%s %s failed: %s%s%s", what, r->url, curl_easy_strerror(cc),
                    r->curlerr[0] ? ": " : "", r->curlerr);
        return transient ? R_RETRY : R_FAIL;
    }
    long code = r->code;
    if (code >= 200 && code < 300)
        return R_OK;
    char s3[128];
    s3_code(r, s3, sizeof s3);
    if (code == 404 && strcmp(s3, "NoSuchBucket") != 0) {
        zrr_err_set(e, ZR_EIO, "%s %s: 404 Not Found%s%s", what, r->url, s3[0] ? " " : "", s3);
        return R_MISSING;
    }
    if (code == 429 || code >= 500) {
        zrr_err_set(e, ZR_EIO, "%s %s: HTTP %ld%s%s from the server (gave up after %u retries)", what,
                    r->url, code, s3[0] ? " " : "", s3, c->cfg.retries);
        return R_RETRY;
    }
    if (code == 412 || code == 416) {
        zrr_err_set(e, ZR_ECORRUPT, "%s %s: the object changed on the server since the store was "
                    "opened (HTTP %ld: %s); reopen the store to read the new version", what,
                    r->url, code, code == 412 ? "its ETag no longer matches" : "its size changed");
        return R_FAIL;
    }
    if (code == 401 || strcmp(s3, "InvalidAccessKeyId") == 0 ||
        strcmp(s3, "SignatureDoesNotMatch") == 0 || strcmp(s3, "ExpiredToken") == 0 ||
        strcmp(s3, "InvalidToken") == 0) {
        zrr_err_set(e, ZR_EIO, "%s %s: bad credentials (HTTP %ld%s%s): check AWS_ACCESS_KEY_ID, "
                    "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or the profile", what, r->url, code,
                    s3[0] ? " " : "", s3);
        return R_FAIL;
    }
    if (code == 403) {
        zrr_err_set(e, ZR_EIO, "%s %s: 403 Forbidden%s%s: access denied%s", what, r->url,
                    s3[0] ? " " : "", s3,
                    c->cfg.s3 && !c->cfg.access_key ? " (no AWS credentials were found, so the "
                                                      "request was not signed)" : "");
        return R_FAIL;
    }
    zrr_err_set(e, ZR_EIO, "%s %s: HTTP %ld%s%s", what, r->url, code, s3[0] ? " " : "", s3);
    return R_FAIL;
}

/* Backoff before attempt `attempt` (1 = first retry), in ms. */
static unsigned backoff_ms(unsigned attempt, unsigned retry_after_s, uint64_t *seed)
{
    unsigned base = 100u << (attempt > 6 ? 6 : attempt - 1);
    if (base > 5000)
        base = 5000;
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    unsigned ms = base / 2 + (unsigned)((*seed >> 33) % (base / 2 + 1));
    if (retry_after_s && retry_after_s * 1000u > ms)
        ms = retry_after_s * 1000u;
    return ms;
}

/* Sleep ms in slices, stopping early on close or interrupt: 1 if stopped. */
static int nap(zrr_ctx *c, unsigned ms)
{
    while (ms > 0) {
        if (atomic_load(&c->stop) || (c->interrupt && atomic_load(c->interrupt)))
            return 1;
        unsigned s = ms < 50 ? ms : 50;
        zrp_sleep_ms(s);
        ms -= s;
    }
    return 0;
}

/* Run one synchronous request with retries. `prep` sets the method. */
typedef void (*prep_fn)(CURL *h, req *r, void *arg, struct curl_slist **hdrs);

static int run_sync(zrr_ctx *c, const char *url, const char *what, prep_fn prep, void *arg,
                    req *out, bool *missing)
{
    uint64_t seed = zrp_now_ns();
    zrr_err_buf e = {0};
    *missing = false;
    for (unsigned attempt = 0;; attempt++) {
        CURL *h = curl_easy_init();
        if (!h)
            return zr_set_error(ZR_ENOMEM, "remote: cannot create a curl handle");
        req r = *out;
        r.c = c;
        r.url = url;
        r.got = 0;
        r.errlen = 0;
        r.errbody[0] = '\0';
        r.curlerr[0] = '\0';
        struct curl_slist *hdrs = NULL;
        setup(h, c, &r, &hdrs);
        prep(h, &r, arg, &hdrs);
        if (hdrs)
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        CURLcode cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.code);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        /* A body bigger than the cap of a get_all. */
        if (r.overflow && r.grow) {
            free(r.buf);
            return zr_set_error(ZR_ETOOBIG, "%s %s: the object is larger than %zu bytes", what, url,
                                r.max_len);
        }
        zrr_err_buf one = {0};
        int k = classify(c, cc, &r, what, &one);
        if (k == R_OK || k == R_MISSING) {
            *out = r;
            *missing = k == R_MISSING;
            return ZR_OK;
        }
        if (r.grow)
            free(r.buf);
        e = one;
        if (k == R_FAIL || attempt >= c->cfg.retries)
            break;
        if (nap(c, backoff_ms(attempt + 1, r.retry_after_s, &seed)))
            return zr_set_error(atomic_load(&c->stop) ? ZR_ECLOSED : ZR_EINTR, "%s %s: %s", what,
                                url, atomic_load(&c->stop) ? "stopped, the store is being closed"
                                                           : "interrupted");
    }
    return zr_set_error(e.status, "%s", e.msg);
}

static void prep_head(CURL *h, req *r, void *arg, struct curl_slist **hdrs)
{
    (void)r;
    (void)arg;
    (void)hdrs;
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
}

int zrr_http_head(zrr_ctx *c, const char *url, zrr_resp *resp)
{
    req r;
    memset(&r, 0, sizeof r);
    bool missing;
    int rc = run_sync(c, url, "HEAD", prep_head, NULL, &r, &missing);
    if (rc < 0)
        return rc;
    if (missing)
        return 0;
    if (!r.have_length)
        return zr_set_error(ZR_EIO, "HEAD %s: the server gave no Content-Length", url);
    resp->code = r.code;
    resp->total = r.content_length;
    snprintf(resp->etag, sizeof resp->etag, "%s", r.etag);
    return 1;
}

static void prep_get(CURL *h, req *r, void *arg, struct curl_slist **hdrs)
{
    (void)h;
    (void)r;
    (void)arg;
    (void)hdrs;
}

int zrr_http_get_all(zrr_ctx *c, const char *url, void **buf, size_t *len, size_t max_len)
{
    req r;
    memset(&r, 0, sizeof r);
    r.grow = true;
    r.max_len = max_len;
    bool missing;
    int rc = run_sync(c, url, "GET", prep_get, NULL, &r, &missing);
    if (rc < 0)
        return rc;
    if (missing) {
        free(r.buf);
        return 0;
    }
    if (r.have_length && r.content_length != r.got) {
        free(r.buf);
        return zr_set_error(ZR_EIO, "GET %s: short body: %zu of %" PRIu64 " bytes", url, r.got,
                            r.content_length);
    }
    *buf = r.buf ? r.buf : malloc(1);
    *len = r.got;
    return *buf ? 1 : zr_set_error(ZR_ENOMEM, "GET %s: out of memory", url);
}

/* ------------------------------------------------------------ upload */

typedef struct put_src {
    zrp_file f;
    const unsigned char *mem;
    uint64_t len, pos;
    int err;
} put_src;

static size_t on_read(char *p, size_t size, size_t n, void *arg)
{
    put_src *s = arg;
    size_t want = size * n;
    if (want > s->len - s->pos)
        want = (size_t)(s->len - s->pos);
    if (want == 0)
        return 0;
    if (s->mem) {
        memcpy(p, s->mem + s->pos, want);
    } else {
        int rc = zrp_pread_all(s->f, p, want, s->pos);
        if (rc < 0) {
            s->err = rc;
            return CURL_READFUNC_ABORT;
        }
    }
    s->pos += want;
    return want;
}

static void prep_put(CURL *h, req *r, void *arg, struct curl_slist **hdrs)
{
    (void)r;
    put_src *s = arg;
    s->pos = 0;
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, s);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)s->len);
    /* The body streams from the file, so its hash is not in the signature
     * (S3's UNSIGNED-PAYLOAD); TLS protects it on the way. (Removing
     * "Expect:" would save a round trip, but libcurl's SigV4 would sign
     * the removed header.) */
    *hdrs = curl_slist_append(*hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    /* A server that never answers "100 Continue" costs 50 ms, not 1 s. */
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 50L);
}

static int put_any(zrr_ctx *c, const char *name, put_src *s)
{
    char *ename = zrr_url_path_escape(name);
    size_t n = strlen(c->cfg.base) + (ename ? strlen(ename) : 0) + 2;
    char *url = ename ? malloc(n) : NULL;
    if (!url) {
        free(ename);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    snprintf(url, n, "%s/%s", c->cfg.base, ename);
    free(ename);
    req r;
    memset(&r, 0, sizeof r);
    r.grow = true;
    r.max_len = 1 << 16;
    bool missing;
    int rc = run_sync(c, url, "PUT", prep_put, s, &r, &missing);
    if (rc == 0) {
        free(r.buf);
        if (missing)
            rc = zr_set_error(ZR_EIO, "PUT %s: 404 Not Found (does the bucket exist?)", url);
        else if (s->err)
            rc = zr_set_error(ZR_EIO, "PUT %s: reading the local file failed: %s", url,
                              zr_os_strerror(s->err));
    }
    free(url);
    return rc;
}

int zrr_put_file(zrr_ctx *c, const char *name, const char *path, uint64_t len)
{
    put_src s = {ZRP_FILE_INVALID, NULL, len, 0, 0};
    int rc = zrp_open(&s.f, path, ZRP_READ);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "push: cannot open %s: %s", path, zr_os_strerror(rc));
    rc = put_any(c, name, &s);
    zrp_close(&s.f);
    return rc;
}

int zrr_put_bytes(zrr_ctx *c, const char *name, const void *buf, size_t len)
{
    put_src s = {ZRP_FILE_INVALID, buf, len, 0, 0};
    return put_any(c, name, &s);
}

/* ------------------------------------------------- block downloads */

struct zrr_job {
    zrr_job *next;
    zrr_job *anext, **aprev; /* the running list (worker only) */
    zrr_obj *obj;
    uint32_t b0, n;
    zrr_ticket *ticket;   /* NULL for a prefetch */
    bool nocache;         /* its ticket streams through (see zrr_cache_store) */
    unsigned attempt;
    uint64_t due_ns;
    uint64_t seed;
    CURL *h;
    struct curl_slist *hdrs;
    req r;
    uint64_t lo, hi; /* bytes [lo, hi) */
    /* Once downloaded (ctx lock): blocks claimed by writers, blocks whose
     * write is over, bytes that went to the cache, and whether the rest
     * were dropped (the store is closing). */
    uint32_t claimed, written;
    uint64_t cached_bytes;
    bool dropped;
};

int zrr_job_queue(zrr_ctx *c, zrr_obj *o, uint32_t b0, uint32_t n, zrr_ticket *t)
{
    zrr_job *j = calloc(1, sizeof *j);
    if (!j)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory queueing a download");
    j->obj = o;
    j->b0 = b0;
    j->n = n;
    j->ticket = t;
    j->lo = (uint64_t)b0 << c->cfg.block_shift;
    j->hi = (uint64_t)(b0 + n) << c->cfg.block_shift;
    if (j->hi > o->size)
        j->hi = o->size;
    j->seed = zrp_now_ns() ^ ((uint64_t)b0 << 20);
    if (t) {
        t->pending++;
        j->nocache = t->nocache;
    }
    j->next = c->queue;
    c->queue = j;
    return ZR_OK;
}

/* Nobody wants the job any more: its ticket was released (its waiter was
 * interrupted) or the store's interrupt is set. Read by the worker without
 * the lock (a ticket lives until its last job is over). */
static bool job_unwanted(const zrr_ctx *c, const zrr_job *j)
{
    if (c->interrupt && atomic_load_explicit(c->interrupt, memory_order_relaxed))
        return true;
    return j->ticket && atomic_load_explicit(&j->ticket->gone, memory_order_relaxed);
}

static int on_job_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c2;
    (void)d;
    zrr_job *j = arg;
    zrr_ctx *c = j->obj->ctx;
    return atomic_load_explicit(&c->stop, memory_order_relaxed) || job_unwanted(c, j);
}

static int job_start(zrr_ctx *c, zrr_job *j)
{
    j->h = curl_easy_init();
    if (!j->h)
        return -1;
    memset(&j->r, 0, sizeof j->r);
    j->r.c = c;
    j->r.url = j->obj->url;
    j->r.cap = (size_t)(j->hi - j->lo);
    j->r.buf = malloc(j->r.cap ? j->r.cap : 1);
    if (!j->r.buf) {
        curl_easy_cleanup(j->h);
        j->h = NULL;
        return -1;
    }
    j->hdrs = NULL;
    setup(j->h, c, &j->r, &j->hdrs);
    char range[96];
    snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, j->lo, j->hi - 1);
    curl_easy_setopt(j->h, CURLOPT_RANGE, range);
    if (j->obj->strong_etag) {
        size_t n = strlen(j->obj->etag) + 16;
        char *line = malloc(n);
        if (line) {
            snprintf(line, n, "If-Match: %s", j->obj->etag);
            j->hdrs = curl_slist_append(j->hdrs, line);
            free(line);
        }
    }
    if (j->hdrs)
        curl_easy_setopt(j->h, CURLOPT_HTTPHEADER, j->hdrs);
    curl_easy_setopt(j->h, CURLOPT_PRIVATE, j);
    curl_easy_setopt(j->h, CURLOPT_XFERINFOFUNCTION, on_job_progress);
    curl_easy_setopt(j->h, CURLOPT_XFERINFODATA, j);
    curl_multi_add_handle((CURLM *)c->multi, j->h);
    c->active++;
    j->anext = c->running;
    if (c->running)
        c->running->aprev = &j->anext;
    c->running = j;
    j->aprev = &c->running;
    return 0;
}

static void job_release_handle(zrr_ctx *c, zrr_job *j)
{
    if (j->h) {
        curl_multi_remove_handle((CURLM *)c->multi, j->h);
        curl_easy_cleanup(j->h);
        j->h = NULL;
        c->active--;
        *j->aprev = j->anext;
        if (j->anext)
            j->anext->aprev = j->aprev;
        j->anext = NULL;
        j->aprev = NULL;
    }
    curl_slist_free_all(j->hdrs);
    j->hdrs = NULL;
    free(j->r.buf);
    j->r.buf = NULL;
}

/* The job is over (ctx lock held): clear its blocks' FETCHING bits, tell
 * its ticket, free it. */
static void job_finish(zrr_ctx *c, zrr_job *j, const zrr_err_buf *err)
{
    for (uint32_t b = j->b0; b < j->b0 + j->n; b++)
        atomic_fetch_and(&j->obj->blk[b].st, ~ZRR_FETCHING);
    zrr_ticket *t = j->ticket;
    if (t) {
        if (err && err->status < 0 && t->err.status == 0)
            t->err = *err;
        if (--t->pending == 0 && t->abandoned)
            zrr_ticket_free(t);
    }
    zrp_cond_broadcast(&c->cond);
    free(j);
}

/* Blocks of a downloaded job are over (written, or dropped): the last
 * one frees its bytes and finishes it (lock held). */
static void job_blocks_over(zrr_ctx *c, zrr_job *j, uint32_t n)
{
    j->written += n;
    if (j->written < j->n)
        return;
    free(j->r.buf);
    j->r.buf = NULL;
    c->fresh_bytes += j->cached_bytes;
    zrr_err_buf e = {0};
    if (j->dropped)
        zrr_err_set(&e, ZR_ECLOSED, "GET %s: the store is being closed", j->obj->url);
    job_finish(c, j, &e);
}

int zrr_job_store_one(zrr_ctx *c)
{
    zrr_job *j = c->done;
    if (!j)
        return 0;
    const uint32_t b = j->b0 + j->claimed++;
    if (j->claimed == j->n)
        c->done = j->next; /* every block claimed: the job leaves the list */
    zrp_mutex_unlock(&c->lock);
    zrr_obj *o = j->obj;
    const uint64_t at = ((uint64_t)b << c->cfg.block_shift) - j->lo;
    const uint32_t len = zrr_block_len(o, b);
    const bool cached = zrr_cache_store(o, b, j->r.buf + at, len, j->nocache) == 0;
    zrp_mutex_lock(&c->lock);
    if (cached)
        j->cached_bytes += len;
    job_blocks_over(c, j, 1);
    return 1;
}

/* A writer thread: writes downloaded blocks until the ctx stops. */
static void writer_main(void *arg)
{
    zrr_ctx *c = arg;
    zrp_mutex_lock(&c->lock);
    while (!atomic_load(&c->stop)) {
        if (!zrr_job_store_one(c))
            (void)zrp_cond_timedwait(&c->cond, &c->lock, 200000000u);
    }
    zrp_mutex_unlock(&c->lock);
}

/* A transfer ended: check the response and store the blocks, or retry. */
static void job_done(zrr_ctx *c, zrr_job *j, CURLcode cc)
{
    curl_easy_getinfo(j->h, CURLINFO_RESPONSE_CODE, &j->r.code);
    zrr_err_buf e = {0};
    int k = classify(c, cc, &j->r, "GET", &e);
    const uint64_t want = j->hi - j->lo;
    zrr_obj *o = j->obj;
    if (k == R_OK) {
        if (j->r.code == 200 && !(j->lo == 0 && want == o->size)) {
            zrr_err_set(&e, ZR_EIO, "GET %s: the server ignored the byte range %" PRIu64 "-%" PRIu64
                        " (HTTP 200 for the whole object)", o->url, j->lo, j->hi - 1);
            k = R_FAIL;
        } else if ((j->r.have_range_total && j->r.range_total != o->size) ||
                   (o->etag[0] && j->r.etag[0] && strcmp(j->r.etag, o->etag) != 0)) {
            zrr_err_set(&e, ZR_ECORRUPT, "GET %s: the object changed on the server since the store "
                        "was opened (ETag %s, %" PRIu64 " bytes; now %s, %" PRIu64 " bytes); reopen "
                        "the store to read the new version", o->url, o->etag, o->size,
                        j->r.etag[0] ? j->r.etag : "?",
                        j->r.have_range_total ? j->r.range_total : o->size);
            k = R_FAIL;
        } else if (j->r.got != want) {
            zrr_err_set(&e, ZR_EIO, "GET %s: short body: %zu of %" PRIu64 " bytes of range %" PRIu64
                        "-%" PRIu64, o->url, j->r.got, want, j->lo, j->hi - 1);
            k = R_RETRY;
        }
    } else if (k == R_MISSING) {
        zrr_err_buf m = {0};
        zrr_err_set(&m, ZR_ECORRUPT, "GET %s: the object is gone from the server (404) since the "
                    "store was opened", o->url);
        e = m;
        k = R_FAIL;
    }
    if (k == R_OK) {
        /* Checked: its blocks are written by the writer threads and the
         * threads waiting for a ticket, so the transfers go on. */
        unsigned char *buf = j->r.buf;
        j->r.buf = NULL;
        job_release_handle(c, j);
        j->r.buf = buf;
        zrp_mutex_lock(&c->lock);
        j->next = c->done;
        c->done = j;
        zrp_cond_broadcast(&c->cond);
        zrp_mutex_unlock(&c->lock);
        return;
    }
    unsigned retry_after = j->r.retry_after_s;
    job_release_handle(c, j);
    if (k == R_RETRY && j->attempt < c->cfg.retries && !job_unwanted(c, j)) {
        j->attempt++;
        j->due_ns = zrp_now_ns() + (uint64_t)backoff_ms(j->attempt, retry_after, &j->seed) * 1000000u;
        zrp_mutex_lock(&c->lock);
        j->next = c->queue;
        c->queue = j;
        zrp_mutex_unlock(&c->lock);
        return;
    }
    if (k == R_RETRY && e.status < 0 && strstr(e.msg, "gave up") == NULL) {
        size_t l = strlen(e.msg);
        snprintf(e.msg + l, sizeof e.msg - l, " (after %u retries)", j->attempt);
    }
    zrp_mutex_lock(&c->lock);
    job_finish(c, j, &e);
    zrp_mutex_unlock(&c->lock);
}

static void worker_main(void *arg)
{
    zrr_ctx *c = arg;
    CURLM *m = (CURLM *)c->multi;
    while (!atomic_load(&c->stop)) {
        /* Start what is due, up to `connections` transfers. */
        uint64_t now = zrp_now_ns(), next_due = UINT64_MAX;
        zrp_mutex_lock(&c->lock);
        zrr_job **pp = &c->queue;
        while (*pp) {
            zrr_job *j = *pp;
            if (job_unwanted(c, j)) {
                *pp = j->next;
                zrr_err_buf e = {0};
                zrr_err_set(&e, ZR_EINTR, "GET %s: interrupted", j->obj->url);
                job_finish(c, j, &e);
                continue;
            }
            if (c->active >= c->cfg.connections) {
                break;
            }
            if (j->due_ns > now) {
                if (j->due_ns < next_due)
                    next_due = j->due_ns;
                pp = &j->next;
                continue;
            }
            *pp = j->next;
            if (job_start(c, j) < 0) {
                zrr_err_buf e = {0};
                zrr_err_set(&e, ZR_ENOMEM, "GET %s: out of memory for a %" PRIu64 "-byte range",
                            j->obj->url, j->hi - j->lo);
                job_finish(c, j, &e);
            }
        }
        zrp_mutex_unlock(&c->lock);

        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            zrr_job *j = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            CURLcode cc = msg->data.result;
            job_done(c, j, cc);
        }
        /* Without writer threads (none could start), downloaded blocks
         * nobody waiting is free to write are written here. */
        if (c->nwriters == 0) {
            zrp_mutex_lock(&c->lock);
            while (c->done && c->idle_waiters == 0 && !atomic_load(&c->stop))
                (void)zrr_job_store_one(c);
            zrp_mutex_unlock(&c->lock);
        }
        now = zrp_now_ns();
        if (now - c->last_upkeep_ns > 1000000000u) {
            c->last_upkeep_ns = now;
            zrr_cache_upkeep(c, false);
        }
        int wait_ms = 200;
        if (next_due != UINT64_MAX) {
            uint64_t d = next_due > now ? (next_due - now) / 1000000u + 1 : 0;
            if (d < (uint64_t)wait_ms)
                wait_ms = (int)d;
        }
        if (running > 0 || wait_ms > 0)
            curl_multi_poll(m, NULL, 0, wait_ms, NULL);
    }
    /* Closing: abort what runs, fail what waits. */
    zrp_mutex_lock(&c->lock);
    while (c->done) {
        /* Blocks not claimed are dropped; a block being written by a
         * waiting thread finishes the job when its write is over. */
        zrr_job *j = c->done;
        c->done = j->next;
        uint32_t left = j->n - j->claimed;
        j->claimed = j->n;
        j->dropped = true;
        job_blocks_over(c, j, left);
    }
    while (c->queue) {
        zrr_job *j = c->queue;
        c->queue = j->next;
        zrr_err_buf e = {0};
        zrr_err_set(&e, ZR_ECLOSED, "GET %s: the store is being closed", j->obj->url);
        job_finish(c, j, &e);
    }
    zrp_mutex_unlock(&c->lock);
    /* Every transfer still running is aborted. */
    while (c->running) {
        zrr_job *j = c->running;
        job_release_handle(c, j);
        zrp_mutex_lock(&c->lock);
        zrr_err_buf e = {0};
        zrr_err_set(&e, ZR_ECLOSED, "GET %s: the store is being closed", j->obj->url);
        job_finish(c, j, &e);
        zrp_mutex_unlock(&c->lock);
    }
}

int zrr_worker_start(zrr_ctx *c)
{
    c->multi = curl_multi_init();
    if (!c->multi)
        return zr_set_error(ZR_ENOMEM, "remote: cannot create a curl multi handle");
    curl_multi_setopt((CURLM *)c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->cfg.connections);
    CURLSH *sh = curl_share_init();
    if (sh) {
        curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        c->curl_share = sh;
    }
    int rc = zrp_thread_start(&c->worker, worker_main, c);
    if (rc < 0) {
        curl_multi_cleanup((CURLM *)c->multi);
        c->multi = NULL;
        return zr_set_error(ZR_EIO, "remote: cannot start the download thread: %s",
                            zr_os_strerror(rc));
    }
    c->worker_started = true;
    /* Writers: one per CPU (a write is CPU work: copy into the page cache,
     * CRC-32, map), at least two, at most one per connection. A writer
     * that cannot start is no error: the others, the waiting threads and
     * (with none at all) the worker write instead. */
    unsigned w = zrp_cpu_count();
    if (w < 2)
        w = 2;
    if (w > c->cfg.connections)
        w = c->cfg.connections;
    if (w > ZRR_MAX_WRITERS)
        w = ZRR_MAX_WRITERS;
    while (c->nwriters < w && zrp_thread_start(&c->writers[c->nwriters], writer_main, c) == 0)
        c->nwriters++;
    return ZR_OK;
}

void zrr_worker_stop(zrr_ctx *c)
{
    atomic_store(&c->stop, 1);
    /* Writers first: each ends after the block it is writing; the worker
     * then drops what is left. */
    zrp_mutex_lock(&c->lock);
    zrp_cond_broadcast(&c->cond);
    zrp_mutex_unlock(&c->lock);
    for (unsigned i = 0; i < c->nwriters; i++)
        zrp_thread_join(c->writers[i]);
    c->nwriters = 0;
    if (c->worker_started) {
        curl_multi_wakeup((CURLM *)c->multi);
        zrp_thread_join(c->worker);
        c->worker_started = false;
    }
    if (c->multi)
        curl_multi_cleanup((CURLM *)c->multi);
    c->multi = NULL;
    if (c->curl_share)
        curl_share_cleanup((CURLSH *)c->curl_share);
    c->curl_share = NULL;
}

void zrr_worker_wake(zrr_ctx *c)
{
    if (c->multi)
        curl_multi_wakeup((CURLM *)c->multi);
}
